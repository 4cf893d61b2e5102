"""Fault injection through real Ray Tune on 2 CPUs: whatever trials do, no evaluation is lost or
duplicated, no wrong value is accepted, and every run ends by itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchers.fault_injection import FAULTS
from searchers.fault_injection import FaultRunSummary
from searchers.fault_injection import kill_and_restore
from searchers.fault_injection import run_faulty_search

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]

# Every fault an unwrapped trainable can show Tune (a hang needs `isolated_trainable`).
UNWRAPPED = [f for f in FAULTS if f not in ("hang", "leak")]


def _assert_sound(summary: FaultRunSummary) -> None:
    assert summary.evaluations == summary.budget == summary.trials, summary
    assert summary.lost == 0 and summary.duplicated == 0, summary
    assert summary.faulty > 0, "no fault was injected: the test tests nothing"
    assert summary.wrong_values_accepted == 0, summary
    assert summary.best == summary.healthy_best, summary


def test_single_objective_steady_state_with_tune_defaults(
    tmp_path: Path, ray_cluster: None
) -> None:
    summary = run_faulty_search(UNWRAPPED, storage=tmp_path, rate=0.3, budget=12)
    _assert_sound(summary)
    assert summary.statuses.get("ok", 0) < summary.budget


def test_multi_objective_generational(tmp_path: Path, ray_cluster: None) -> None:
    summary = run_faulty_search(
        UNWRAPPED,
        storage=tmp_path,
        rate=0.3,
        budget=12,
        objectives=2,
        steady_state=False,
        seed=1,
        reuse_actors=True,  # the faults end their trials' actors; the healthy trials share two
    )
    _assert_sound(summary)


def test_isolated_hangs_leaks_and_crashes_end_on_time(tmp_path: Path, ray_cluster: None) -> None:
    limit = 2.0
    summary = run_faulty_search(
        ["hang", "leak", "crash", "exception"],
        storage=tmp_path,
        rate=0.4,
        budget=12,
        isolated=True,
        trial_timeout_s=limit,
        max_worker_rss_mb=600,
        reuse_actors=True,  # one worker per actor serves many trials: leaks add up, spawns are few
        seed=2,
    )
    _assert_sound(summary)
    assert summary.statuses.get("timeout", 0) >= 1
    # A hung trial costs its limit plus loading its worker, never the hour it sleeps.
    assert summary.max_failed_trial_s < limit + 30
    if summary.max_worker_rss_mb is not None:  # a leaking trial ran: its worker was recycled
        assert summary.max_worker_rss_mb < 600 + 200 + 50


def test_sigkill_of_the_driver_then_restore_ends_on_budget_without_duplicates(
    tmp_path: Path,
) -> None:
    """The drivers are other processes with their own Ray (this one's is not theirs to kill)."""
    record = kill_and_restore(tmp_path, budget=12, kill_after=4)
    assert record["killed_at"] < 12
    assert record["trials"] == record["evaluations"] == record["distinct_configs"] == 12
    assert record["wrong_values_accepted"] == 0
    # Tune runs trials that were in flight or not yet checkpointed at the kill again (same trial,
    # same config): more executions, never another configuration.
    assert record["executed_distinct"] == 12 <= record["executed"]
