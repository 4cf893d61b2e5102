"""A tiny Triton description of `row_scale.py` (one parameter, one compiler control) for tests
that tune it end to end under Triton's interpreter."""

from __future__ import annotations

from pathlib import Path

import yaml

SOURCE = Path(__file__).with_name("row_scale.py")


def row_scale_description(folder: Path, **fields: object) -> Path:
    """Write ``row_scale.yaml`` into `folder` and return its path; `fields` add to or replace the
    description's fields (`sizes` or `shapes` among them: the description has neither)."""
    data = {
        "name": "row_scale",
        "kind": "triton",
        "source": str(SOURCE),
        "entry": "row_scale_kernel",
        "sizes_not_passed": ["rows"],
        "inputs": [
            {"name": "x", "shape": ["rows", "n_cols"]},
            {"name": "y", "shape": ["rows", "n_cols"]},
        ],
        "outputs": ["y"],
        "grid": "(rows,)",
        "reference": "2.0 * x",
        "tolerance": {"atol": 1e-6, "rtol": 1e-6},
        "params": {"BLOCK": {"ordinal": [16, 32, 64]}},
        "controls": {"triton": {"include": ["num_warps"]}},
        **fields,
    }
    path = folder / "row_scale.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
