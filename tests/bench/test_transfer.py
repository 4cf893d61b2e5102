"""Transfer in the replay harness: every tuner starts from the same earlier search's best."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ciq import engine_tuner
from bench.replay import DEFAULT_DATA
from bench.replay import BenchError
from bench.replay import Problem
from bench.replay import load_problem
from bench.search_efficiency import main
from bench.transfer import EarlierSearch
from bench.transfer import transfer_tuners

GEMM = "kernel_tuner_paper_2018/gemm_brute_force.json.gz"
GEMM_AMD = "kernel_tuner_paper_2018/gemm_amd_brute_force.json.gz"


@pytest.fixture(scope="module")
def gemm(small: Problem) -> Problem:  # `small` skips without the data
    return load_problem(DEFAULT_DATA, GEMM)


def test_every_tuner_starts_from_the_earlier_searchs_best(gemm: Problem) -> None:
    earlier = EarlierSearch(str(DEFAULT_DATA), budget=30)
    assert earlier.source(gemm, seed=5) == GEMM_AMD  # its one sibling with the same parameters
    results = earlier(gemm, seed=5)
    assert len(results.records) == 30
    start = earlier.start(gemm, seed=5)
    assert start == [r.config for r in results.best(4)]  # feasible on both GPUs' space
    tuners = transfer_tuners(earlier, None)
    for name in ("ciq", "random", "optuna_tpe"):
        replay = tuners[name](gemm, 10, 5)
        assert list(replay.seen)[:4] == [gemm.key(c) for c in start], name
    cold = engine_tuner("auto")(gemm, 10, 5)
    assert list(cold.seen)[:4] != list(replay.seen)[:4]


def test_the_earlier_search_is_on_another_gpu_never_a_copy_of_the_same(small: Problem) -> None:
    a100 = load_problem(DEFAULT_DATA, "benchmark_hub/convolution_milo/A100.json.gz")
    sources = {EarlierSearch(str(DEFAULT_DATA)).source(a100, seed) for seed in range(10)}
    gpus = {Path(s).name.split(".")[0] for s in sources}
    assert gpus == {"A4000", "A6000", "MI250X", "W6600", "W7800"}  # not A100_T4, not MI50_old


def test_a_dataset_without_a_sibling_is_refused(small: Problem, tmp_path) -> None:
    with pytest.raises(BenchError, match="no sibling with its parameters"):
        EarlierSearch(str(DEFAULT_DATA))(small, 0)
    argv = ["--transfer", "--tuners", "kt_genetic_algorithm", "--seeds", "1"]
    with pytest.raises(SystemExit):
        main([*argv, "--out", str(tmp_path / "x.json")])


def test_gpu_runs_are_summarised_one_row_each(tmp_path) -> None:
    import pandas as pd

    from bench.transfer import main

    runs = [("scratch", [3.0, 2.0, 1.99], 1.1), ("transfer", [1.0, 2.0], None)]
    for arm, times, speedup in runs:
        run = tmp_path / "runs" / f"{arm}-7"
        run.mkdir(parents=True)
        pd.DataFrame({"candidate_id": range(len(times)), "status": "ok", "time_ms": times}).to_csv(
            run / "evaluations.csv", index=False
        )
        remeasured = f"{{speedup: {speedup}, speedup_ci: [1.0, 1.2]}}" if speedup else "null"
        (run / "k.controls.yaml").write_text(
            f"benchmark: {{metric: time_ms}}\nscores: {{best: 1.0, remeasured: {remeasured}}}\n"
        )
    assert main([str(tmp_path / "runs"), str(tmp_path / "out.csv")]) == 0
    rows = pd.read_csv(tmp_path / "out.csv").to_dict("records")
    assert [(r["arm"], r["seed"], r["evaluations"]) for r in rows] == [
        ("scratch", 7, 3),
        ("transfer", 7, 2),
    ]
    # Within 2 % of the best of all runs (1.0, the transfer run's first evaluation).
    assert rows[1]["evals_to_within_2pct_of_all_runs_best"] == 1
    assert [r["search_best"] for r in rows] == [1.99, 1.0]
    assert rows[0]["shipped_speedup_remeasured"] == 1.1
    assert pd.isna(rows[1]["shipped_speedup_remeasured"])
    assert pd.isna(rows[0]["evals_to_within_2pct_of_all_runs_best"])
