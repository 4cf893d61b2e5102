"""`bench.to_target`: the harness's count to a fraction of the optimum, each run stopped there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.ciq import engine_tuner
from bench.metrics import evals_to
from bench.replay import Problem
from bench.to_target import main
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
