"""`bench.engine_pace`: the default engine's own time per suggestion, on a small recorded space."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from bench.ciq import engine_tuner
from bench.engine_pace import ReplayTime
from bench.engine_pace import main
from bench.engine_pace import pace_run
from bench.engine_pace import replay_estimate
from bench.engine_pace import table
from bench.engine_pace import window_stats
from bench.replay import Problem
from tests.bench.conftest import SMALL


def test_every_suggestion_is_timed_and_the_search_is_the_harness_search(small: Problem) -> None:
    run = pace_run(small, seed=3, evaluations=40)
    assert run.strategy == "screened" and run.most_in_flight == 1
    assert len(run.ms) == len(run.keys) == 40
    assert all(ms > 0 for ms in run.ms)
    assert len(set(run.keys)) == 40  # never a configuration twice
    # The timed loop is the replay harness's search: the same proposals in the same order.
    assert run.keys == list(engine_tuner("auto")(small, 40, 3).seen)
    rows = window_stats([run], 15)
    assert [(w.start, w.stop) for w in rows] == [(0, 15), (15, 30), (30, 40)]
    for w in rows:
        assert 0 < w.median <= w.p95 <= w.max
        assert w.mean == pytest.approx(statistics.fmean(run.ms[w.start : w.stop]))
    assert "| 15-30 |" in table([run], 15)


def test_candidates_kept_out_are_told_oldest_first(small: Problem) -> None:
    run = pace_run(small, seed=0, evaluations=30, in_flight=8)
    assert 1 < run.most_in_flight <= 8  # a generation goes out at once
    assert len(run.ms) == len(set(run.keys)) == 30


def test_the_command_prints_the_windows_and_writes_the_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pace.json"
    args = ["--dataset", SMALL, "--evaluations", "24", "--seeds", "0", "1", "--window", "12"]
    assert main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| 0-12 |" in printed and "| 12-24 |" in printed and "last window (12-24)" in printed
    runs = json.loads(out.read_text())["runs"]
    assert [r["seed"] for r in runs] == [0, 1] and all(len(r["ms"]) == 24 for r in runs)


def test_the_replay_is_estimated_from_the_runs_timed(capsys: pytest.CaptureFixture[str]) -> None:
    times = [ReplayTime("a", 0, 800, 30.0), ReplayTime("a", 1, 800, 50.0)]
    times.append(ReplayTime("b", 0, 800, 10.0))
    assert replay_estimate(times, seeds=10, workers=2) == pytest.approx((40 + 10) * 10 / 2)
    args = ["--replay", "--datasets", SMALL, "--evaluations", "20", "--replay-seeds", "0"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "python -m bench.search_efficiency --tuners ciq --seeds 10 --budget 800" in printed
    assert f"{SMALL} seed 0: 20 evaluations in" in printed and "estimated: 1 files" in printed
