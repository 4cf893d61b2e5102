"""`bench.matrix_exhaustive` on a CPU (Triton's interpreter): the search against its exhaustive
sweep, with @triton.autotune and the description's alternative re-measured beside them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from bench.matrix_exhaustive import main
from tests.objectives.data.row_scale_description import row_scale_description


def test_the_search_the_sweep_and_the_peers_are_re_measured_per_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # what --dry-run sets, undone after the test
    shapes = [{"rows": 2, "n_cols": 16}, {"rows": 4, "n_cols": 64, "weight": 3}]
    alternative = {"name": "torch", "expression": "2.0 * x"}
    path = row_scale_description(tmp_path, shapes=shapes, alternative=alternative)
    listed = tmp_path / "autotune.yaml"
    listed.write_text(
        yaml.safe_dump(
            [
                {"params": {"BLOCK": 16}, "controls": {"triton": {"num_warps": 4}}},
                {"params": {"BLOCK": 64}, "controls": {"triton": {"num_warps": 2}}},
            ]
        )
    )
    out = tmp_path / "out"
    assert (
        main(
            [str(path), "--dry-run", "--out", str(out), "--rounds", "3", "--autotune", str(listed)]
        )
        == 0
    )
    results = json.loads((out / "matrix_exhaustive.json").read_text())
    # autotune chose one of its two configurations per shape, as a configuration of the kernel
    assert [c["params"]["BLOCK"] in (16, 64) for c in results["autotune"]["choices"]] == [True] * 2
    for shape in results["shapes"]:
        assert set(shape["samples_ms"]) == {"search", "exhaustive", "autotune", "alternative"}
        assert all(len(v) == 3 for v in shape["samples_ms"].values())
        assert set(shape["peers"]) == {"autotune", "alternative"}
    assert set(results["peers"]) == {"autotune", "alternative"}
    assert all(math.isfinite(p["geomean"]) for p in results["peers"].values())
