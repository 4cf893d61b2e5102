"""Triton kernels as their projects ship them, under Triton's interpreter: tensors matched to
parameters by name, strides and counts from `arguments`, `@triton.autotune` and
`@triton.heuristics` unwrapped (`objectives.triton_entry`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from objectives import load_description
from objectives.description import DescriptionError
from tests.interpreted import run_interpreted

REPO = Path(__file__).resolve().parents[2]
KERNEL = Path(__file__).with_name("data") / "rms_norm_shipped.py"


def shipped_description(folder: Path, **fields: object) -> Path:
    """The RMS norm of `rms_norm_shipped.py` described without editing it."""
    import yaml

    data = {
        "name": "rms_norm_shipped",
        "kind": "triton",
        "source": str(KERNEL),
        "entry": "rms_norm_forward",
        "sizes": {"M": 6, "N": 40},
        "sizes_not_passed": ["M", "N"],
        "arguments": {"Y_row_stride": "N", "X_row_stride": "N", "n_cols": "N"},
        "scalars": {"eps": 1e-6},
        "inputs": [
            {"name": "X_ptr", "shape": ["M", "N"], "dtype": "float32"},
            {"name": "W_ptr", "shape": ["N"], "dtype": "float32"},
            {"name": "Y_ptr", "shape": ["M", "N"], "dtype": "float32"},
        ],
        "outputs": ["Y_ptr"],
        "grid": "(M,)",
        "reference": "X_ptr * torch.rsqrt((X_ptr * X_ptr).mean(-1, keepdim=True) + 1e-6) * W_ptr",
        "tolerance": {"atol": 1e-4, "rtol": 1e-4},
        "params": {"num_warps": {"ordinal": [1, 2, 4], "default": 4}},
        "controls": {},
        **fields,
    }
    path = folder / "rms_norm_shipped.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _interpreted(body: str, path: Path) -> dict:
    prelude = "import json, sys\nfrom objectives import load_description\n"
    script = prelude + "desc = load_description(sys.argv[1])\n" + textwrap.dedent(body)
    return run_interpreted(script, str(path))


def test_a_shipped_kernel_is_unwrapped_and_launched_by_name(tmp_path: Path) -> None:
    record = _interpreted(
        """
        from objectives.remeasure import check, make_launch
        from objectives.triton_entry import kernel_entry
        entry = kernel_entry(str(desc.source), desc.entry)
        errors = [check(desc, make_launch(desc, {"params": {"num_warps": w}}, device="cpu"),
                        returns_output=False, device="cpu") for w in (1, 2, 4)]
        json.dump({"configs": len(entry.configs), "heuristics": [n for n, _ in entry.heuristics],
                   "parameters": list(entry.parameters), "errors": errors}, sys.stdout)
        """,
        shipped_description(tmp_path),
    )
    assert record["configs"] == 2 and record["heuristics"] == ["BLOCK_SIZE"]
    assert record["parameters"][:2] == ["Y_ptr", "Y_row_stride"]
    # Checked against the reference for every warp count the autotuner would have refused.
    assert all(e < 1e-4 for e in record["errors"])


def test_a_shipped_kernel_evaluates_in_the_isolated_worker_at_every_shape(tmp_path: Path) -> None:
    shapes = [{"M": 3, "N": 40}, {"M": 5, "N": 100}]
    path = shipped_description(tmp_path, shapes=shapes)
    record = _interpreted(
        """
        from objectives import make_trainable
        result = make_trainable(desc)({"params": {"num_warps": 2}, "controls": {}})
        json.dump({k: v for k, v in result.items() if isinstance(v, (str, int, float))},
                  sys.stdout)
        """,
        path,
    )
    assert record["status"] == "ok", record.get("error")
    assert record["status@0"] == record["status@1"] == "ok"
    # N is passed by `arguments`, so each width is its own specialisation (40, 100 % 16 != 0).
    assert record["compiles"] == 2


def test_the_shipped_reference_of_an_autotuned_kernel_runs_one_configuration(
    tmp_path: Path,
) -> None:
    """`reference: shipped` on a kernel under its own two-configuration `@triton.autotune`:
    the reference launches its first configuration instead of timing both (which needs a GPU
    and would cost each worker seconds per shape), and every candidate checks against it."""
    path = shipped_description(tmp_path, reference="shipped", shapes=[{"M": 3, "N": 40}])
    record = _interpreted(
        """
        from objectives import make_trainable
        result = make_trainable(desc)({"params": {"num_warps": 1}, "controls": {}})
        json.dump({k: v for k, v in result.items() if isinstance(v, str)}, sys.stdout)
        """,
        path,
    )
    assert record["status"] == "ok", record.get("error")


def test_arguments_are_evaluated_per_shape_and_checked_on_load(tmp_path: Path) -> None:
    desc = load_description(shipped_description(tmp_path))
    assert desc.at_shape({"M": 2, "N": 64}).launch_arguments() == {
        "Y_row_stride": 64,
        "X_row_stride": 64,
        "n_cols": 64,
    }
    bad = shipped_description(tmp_path, arguments={"X_row_stride": "K"})
    with pytest.raises(DescriptionError, match=r"arguments\.X_row_stride.*\['K'\]"):
        load_description(bad)
    clash = shipped_description(tmp_path, arguments={"N": "N"})
    with pytest.raises(DescriptionError, match="also name a size"):
        load_description(clash)
    negative = load_description(shipped_description(tmp_path, arguments={"n_cols": "N - 50"}))
    with pytest.raises(DescriptionError, match=r"`arguments.n_cols`.*int >= 0"):
        negative.launch_arguments()


def test_the_kernels_own_autotune_list_is_evaluated_first(tmp_path: Path) -> None:
    from objectives import make_search_space
    from objectives import starting_points

    desc = load_description(shipped_description(tmp_path))
    points = starting_points(desc, make_search_space(desc))
    # The baseline (4 warps, also the autotuner's second), then its first: 2 warps.
    assert [p["params"]["num_warps"] for p in points] == [4, 2]
    # With the warps searched as a Triton control instead, the list lands there.
    as_control = shipped_description(
        tmp_path, params={}, controls={"triton": {"include": ["num_warps"]}}
    )
    desc = load_description(as_control)
    points = starting_points(desc, make_search_space(desc))
    assert {"controls": {"triton": {"num_warps": 2}}} in [
        {"controls": p["controls"]} for p in points
    ]
