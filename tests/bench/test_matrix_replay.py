"""The matrix replay on a synthetic sweep: the search's per-shape choices against the record."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from bench.matrix_replay import canonical
from bench.matrix_replay import from_benchdata
from bench.matrix_replay import from_sweep
from bench.matrix_replay import quality
from bench.matrix_replay import replay
from bench.matrix_replay import sweep_values
from bench.replay import DEFAULT_DATA
from objectives import load_description
from objectives import make_search_space
from tests.objectives.data.row_scale_description import row_scale_description


def _sweep(tmp_path: Path) -> tuple[Path, Path]:
    """A 2-shape row_scale matrix and a fake sweep of its 9 configurations: BLOCK 64 is fastest
    at shape 0, BLOCK 16 at shape 1; BLOCK 32 with 8 warps failed."""
    path = row_scale_description(
        tmp_path, shapes=[{"rows": 1, "n_cols": 64}, {"rows": 8, "n_cols": 64}]
    )
    desc = load_description(path)
    space = make_search_space(desc.at_shape(desc.matrix()[0]))
    folder = tmp_path / "sweep"
    folder.mkdir()
    with (folder / "evaluations.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["config_json", "time_ms@0", "time_ms@1"])
        for _, genes in space.enumerate_genes():
            config = space.decode(genes)
            block = config["params"]["BLOCK"]
            warps = config.get("controls", {}).get("triton", {}).get("num_warps", 4)
            failed = block == 32 and warps == 8
            times = ["nan", "nan"] if failed else [100 / block + warps, block + warps]
            writer.writerow([json.dumps(config), *times])
    return path, folder


@pytest.mark.parametrize("descent", [True, False])
def test_the_replayed_search_finds_each_shapes_optimum_with_the_whole_space(
    tmp_path: Path, descent: bool
) -> None:
    path, folder = _sweep(tmp_path)
    assert sum(v[0] is None for v in sweep_values(folder, 2).values()) == 1  # the failure
    matrix, rows = from_sweep(path, folder)
    assert matrix.descends and matrix.weights == [1.0, 1.0]
    every = len(rows)
    got = replay(matrix, matrix.optimum(rows), [2, every], seed=0, descent=descent)
    assert got[every] == pytest.approx(1.0)  # every configuration seen: both optima
    assert 0 < got[2] <= got[every]


def test_quality_is_the_weighted_geomean_of_optimum_over_choice() -> None:
    assert quality([2.0, 4.0], [1.0, 4.0], [1.0, 1.0]) == pytest.approx(0.5**0.5)
    assert quality([2.0, 4.0], [1.0, 4.0], [3.0, 1.0]) == pytest.approx(0.5**0.75)
    assert quality([None, 4.0], [1.0, 4.0], [1.0, 1.0]) == 0.0
    assert canonical({"params": {"B": 1}, "controls": {"triton": {}}}) == canonical(
        {"params": {"B": 1}}
    )


def test_one_space_recorded_on_two_gpus_replays_as_a_matrix_of_two_shapes() -> None:
    if not (DEFAULT_DATA / "load.py").is_file():
        pytest.skip(f"the recorded benchmark data is not at {DEFAULT_DATA}")
    names = [
        f"benchmark_hub/kt_rtx/pnpoly/{gpu}.json.gz" for gpu in ("RTX_3060_laptop", "RTX_3090")
    ]
    matrix, rows = from_benchdata(DEFAULT_DATA, names)
    assert matrix.weights == [1.0, 1.0] and len(rows) == 4092
    optimum = matrix.optimum(rows)
    assert len(optimum) == 2 and optimum[0] != optimum[1]  # two GPUs, two times
    got = replay(matrix, optimum, [10, 40], seed=0, descent=True)
    assert 0 < got[10] <= got[40] <= 1.0
