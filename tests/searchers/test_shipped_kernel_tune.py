"""End to end on a CPU (Triton's interpreter): a kernel as its project ships it (pointers
interleaved with strides, its own `@triton.autotune` and `@triton.heuristics`) tunes over a
two-shape matrix with no edit to its source, and the controls file loads per shape."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ciq_tune.cli import main
from ciq_tune.runtime import load
from tests.objectives.test_triton_entry import shipped_description

SHAPES = [{"M": 3, "N": 40}, {"M": 4, "N": 100, "weight": 2}]


@pytest.mark.slow
def test_a_shipped_kernel_tunes_over_its_matrix_as_it_is(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "out"
    path = shipped_description(tmp_path, shapes=SHAPES)
    args = ["--budget", "3", "--num-cpus", "2", "--tracking", "none", "--validate-top", "0"]
    assert main(["tune", str(path), *args, "--out", str(out)]) == 0
    with (out / "evaluations.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    # The listed space is 3 warp counts: enumerated, every one correct at both shapes.
    assert sorted(r["config/params/num_warps"] for r in rows) == ["1", "2", "4"]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    tuned = load(out / "rms_norm_shipped.controls.yaml")
    # What `ciq_tune.runtime.tuned` reads a launch's sizes and the tuning's Triton from.
    bench = tuned.controls_file.benchmark
    assert bench.dims == {"X_ptr": ["M", "N"], "W_ptr": ["N"], "Y_ptr": ["M", "N"]}
    assert bench.arguments["n_cols"] == "N"
    assert tuned.controls_file.compilers["triton"]["version"]
    for shape in SHAPES:
        sizes = {k: v for k, v in shape.items() if k != "weight"}
        assert tuned.config_for(sizes)["params"]["num_warps"] in (1, 2, 4)
