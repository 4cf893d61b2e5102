"""What the GPU run scripts read and compute, without a GPU: `bench.cli_run`'s parsing of a
run's output and `bench.matrix_exhaustive`'s weighted geometric mean."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from bench.cli_run import PROGRESS
from bench.cli_run import THROUGHPUT
from bench.cli_run import search_vs_remeasured
from bench.matrix_exhaustive import weighted_geomean_ci
from bench.small_space import one_shape
from objectives import load_description

REPO = Path(__file__).resolve().parents[2]


def test_the_first_result_and_the_search_end_are_recognised_in_the_cli_output() -> None:
    first = "1/100 evaluations, best time_ms 0.216192, 0.03 evals/s"
    found = PROGRESS.match(first)
    assert found is not None and found.group(1) == "1"
    assert PROGRESS.match("12 evaluations, best time_ms 1, 2 evals/s")  # no budget (-1)
    end = "100 evaluations in 48.3 s = 2.07 evals/s, 5.21 after the first result (15 at a time"
    assert THROUGHPUT.match(end) and not PROGRESS.match(end)
    assert not THROUGHPUT.match(first)


def test_search_values_are_paired_with_their_remeasured_medians(tmp_path: Path) -> None:
    candidates = [
        {
            "rank": 1,
            "verdict": "KEPT",
            "search_values": {"time_ms": 0.2},
            "candidate": {"median": 0.23},
        },
        {"rank": 2, "verdict": "REJECTED", "search_values": {"time_ms": 0.25}},
    ]
    (tmp_path / "validation.json").write_text(json.dumps({"candidates": candidates}))
    rows = search_vs_remeasured(tmp_path, "time_ms")
    assert math.isclose(rows[0]["ratio"], 1.15)
    assert rows[1]["remeasured"] is None and rows[1]["ratio"] is None
    assert search_vs_remeasured(tmp_path / "absent", "time_ms") == []


def test_the_weighted_geomean_weighs_shapes_and_brackets_itself() -> None:
    rng = np.random.default_rng(0)
    # Shape 1: the search at 0.9 of the optimum's speed (weight 3); shape 2: equal (weight 1).
    optimum = [1.0 + 0.01 * rng.normal(size=20), 2.0 + 0.02 * rng.normal(size=20)]
    search = [optimum[0] / 0.9, optimum[1].copy()]
    result = weighted_geomean_ci(optimum, search, [3.0, 1.0])
    assert math.isclose(result["geomean"], 0.9**0.75)
    assert result["ci_low"] <= result["geomean"] <= result["ci_high"]


def test_one_shape_of_a_matrix_is_a_description_of_its_own(tmp_path: Path) -> None:
    path = one_shape(REPO / "examples/kernels/triton/layer_norm_launch.yaml", 5, tmp_path)
    desc = load_description(path)
    assert desc.shapes == [] and desc.selection is None
    assert desc.sizes == {"N": 8192, "BLOCK_N": 8192, "ROWS": 1, "M": 8192}
    assert "shapes" not in yaml.safe_load(path.read_text())


def test_launch_overhead_times_the_three_launches(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.launch_overhead import main

    assert main(["--launches", "50"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "µs" not in line]
    assert [r.split("|")[1].strip() for r in rows] == [
        "plain launch",
        "@tuned(file)",
        "inside capture",
    ]
    assert all(float(r.split("|")[2]) > 0 for r in rows)


def test_the_run_table_says_under_which_clock_the_search_and_its_validation_ran() -> None:
    from bench.cli_run import table

    result = {
        "command": "ciq-tune tune x.yaml",
        "wall_s": 30.0,
        "first_result_s": 9.0,
        "search_s": 17.0,
        "nvml_busy_search_pct": 40.0,
        "nvml_busy_run_pct": 60.0,
        "candidates": [],
        "search_conditions": {"sm_clock_mhz": 1980.0, "power_w": 450.0},
        "validation_conditions": {"sm_clock_mhz": 1710.0, "power_w": None},
    }
    lines = table(result).splitlines()
    assert "| search | 1980 | 450 |" in lines and "| after it | 1710 | n/a |" in lines


def test_the_startup_probe_times_processes_started_together(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.startup as startup

    # The GPU probe's output, from a CPU stand-in: import and context seconds.
    monkeypatch.setattr(startup, "PROBE", "print('0.50 0.25')")
    wall_s, each = startup.start(3)
    assert each == [(0.5, 0.25)] * 3 and wall_s > 0
    assert startup.main(["--processes", "2"]) == 0
    assert "| 2 | " in capsys.readouterr().out
