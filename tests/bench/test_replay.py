"""Tests of the replay harness: spaces built from recorded data and unique-evaluation counting."""

from __future__ import annotations

import numpy as np
import pytest

from bench.replay import DEFAULT_DATA
from bench.replay import BenchError
from bench.replay import BudgetExhausted
from bench.replay import Problem
from bench.replay import Replay
from bench.replay import best_fraction_trace
from bench.replay import list_datasets


def test_feasible_set_is_the_restricted_space(small: Problem) -> None:
    assert len(small.feasible) == 1724  # the README's count for this file
    genes = [small.space.encode(small.config(k)) for k in small.feasible[:50]]
    assert all(small.space.is_feasible(g) for g in genes)
    n_failed = sum(t is None for t in small.times.values())
    assert n_failed == 1724 - 1496  # absent from the file = failed (README)


def test_space_rejects_what_the_restrictions_reject(small: Problem) -> None:
    rng = np.random.default_rng(0)
    drawn = [small.space.decode(small.space.sample_genes(rng)) for _ in range(200)]
    assert all(small.key(c) in small.times for c in drawn)


def test_replay_counts_unique_evaluations_failures_included(small: Problem) -> None:
    failed = next(k for k, t in small.times.items() if t is None)
    valid = next(k for k, t in small.times.items() if t is not None)
    replay = Replay(small, budget=3)
    assert replay.evaluate(small.config(failed)) is None
    assert replay.evaluate(small.config(valid)) == small.times[valid]
    assert replay.evaluate(small.config(valid)) == small.times[valid]  # repeat: free
    assert len(replay.seen) == 2
    assert replay.trace == [0.0, small.optimum / small.times[valid]]


def test_replay_refuses_infeasible_and_over_budget(small: Problem) -> None:
    replay = Replay(small, budget=1)
    infeasible = dict(small.config(small.feasible[0]), block_size_x=256, tile_size_x=4)
    infeasible.update(block_size_y=16, tile_size_y=4)
    with pytest.raises(BenchError, match="breaks the restrictions"):
        replay.evaluate(infeasible)
    replay.evaluate(small.config(small.feasible[0]))
    with pytest.raises(BudgetExhausted):
        replay.evaluate(small.config(small.feasible[1]))
    with pytest.raises(BenchError, match="budget"):
        Replay(small, budget=0)


def test_trace_is_padded_with_the_last_best(small: Problem) -> None:
    replay = Replay(small, budget=10)
    replay.evaluate(small.config(small.feasible[0]))
    trace = best_fraction_trace(replay, 4)
    assert trace == [replay.trace[0]] * 4


def test_dataset_globs() -> None:
    if not (DEFAULT_DATA / "load.py").is_file():
        pytest.skip(f"the recorded benchmark data is not at {DEFAULT_DATA}")
    gemm = list_datasets(DEFAULT_DATA, ["*kt_rtx/gemm/*"])
    assert gemm and all("kt_rtx/gemm/" in g for g in gemm)
    with pytest.raises(BenchError, match="match no dataset"):
        list_datasets(DEFAULT_DATA, ["*nothing*"])
