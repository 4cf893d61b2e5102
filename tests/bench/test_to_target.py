"""`bench.to_target`: the harness's count to a fraction of the optimum, each run stopped there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.ciq import engine_tuner
from bench.metrics import evals_to
from bench.replay import DEFAULT_DATA
from bench.replay import Problem
from bench.replay import load_problem
from bench.to_target import main
from bench.transfer import EarlierSearch
from tests.bench.conftest import SMALL


def test_a_run_stopped_at_the_target_counts_as_one_run_to_the_budget(
    small: Problem, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "to95.json"
    harness = tmp_path / "harness.json"
    family = str(Path(SMALL).parent)
    tpe = {"optuna_tpe": {"evals_to_95": 40.0}}
    harness.write_text(
        json.dumps({"datasets": {SMALL: {"tuners": tpe}}, "families": {family: tpe}})
    )
    assert main(["--seeds", "3", "--budget", "120", "--datasets", SMALL, "--workers", "1",
                 "--against", str(harness), "--out", str(out)]) == 0  # fmt: skip
    runs = json.loads(out.read_text())["runs"]
    for run in runs:
        full = engine_tuner("auto")(small, 120, run["seed"])  # on to the budget
        assert run["count"] == evals_to(full.trace, 0.95)
        stopped = engine_tuner("auto", until=0.95)(small, 120, run["seed"])
        assert len(stopped.seen) == run["count"] < len(full.seen)
    printed = capsys.readouterr().out
    assert f"{family}: ours" in printed and f"{SMALL}: ours" in printed
    assert printed.count("optuna_tpe 40.0 = ") == 2


def test_transfer_starts_every_run_from_the_earlier_search(small: Problem, tmp_path: Path) -> None:
    gemm = "kernel_tuner_paper_2018/gemm_brute_force.json.gz"  # its sibling: the AMD GEMM
    out = tmp_path / "to95.json"
    args = ["--seeds", "2", "--budget", "40", "--datasets", gemm, "--workers", "1"]
    assert main([*args, "--transfer", "--out", str(out)]) == 0
    problem = load_problem(DEFAULT_DATA, gemm)
    earlier = EarlierSearch(str(DEFAULT_DATA))
    for run in json.loads(out.read_text())["runs"]:
        started = engine_tuner("auto", None, earlier)(problem, 40, run["seed"])
        assert run["count"] == evals_to(started.trace, 0.95)
        assert next(iter(started.seen)) == problem.key(earlier.start(problem, run["seed"])[0])
