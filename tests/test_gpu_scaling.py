"""bench/scaling.py on a CPU: the rates and efficiencies it derives from a run's trials."""

from __future__ import annotations

import pytest

from bench import scaling


def test_timeouts_leave_the_rate_with_the_slot_time_they_held():
    trials = [
        {"status": "ok", "time_total_s": 2.0},
        {"status": "timeout", "time_total_s": 30.0},
        {"status": "timeout", "time_total_s": 30.0},
        {"status": "compile_error", "time_total_s": 1.0},
    ]
    out = scaling.without_timeouts(trials, wall_s=40.0, concurrency=2)
    assert out["timeouts"] == 2 and out["timeout_s"] == 60.0
    # 60 slot-seconds over 2 slots = 30 s of the 40 s wall: 2 evaluations in 10 s.
    assert out["evals_per_min_without_timeouts"] == pytest.approx(12.0)


def test_a_run_of_only_timeouts_has_no_rate_without_them():
    trials = [{"status": "timeout", "time_total_s": 30.0}]
    assert (
        scaling.without_timeouts(trials, wall_s=30.0, concurrency=1)[
            "evals_per_min_without_timeouts"
        ]
        is None
    )


def test_efficiency_against_the_one_slot_run_with_and_without_timeouts():
    runs = [
        {"slots": 1, "evals_per_min": 10.0, "evals_per_min_without_timeouts": 20.0},
        {"slots": 2, "evals_per_min": 30.0, "evals_per_min_without_timeouts": 30.0},
        {"slots": 4, "evals_per_min": 40.0, "evals_per_min_without_timeouts": None},
    ]
    scaling.add_efficiency(runs)
    assert [r["efficiency"] for r in runs] == [1.0, 1.5, 1.0]
    assert [r["efficiency_without_timeouts"] for r in runs] == [1.0, 0.75, None]
