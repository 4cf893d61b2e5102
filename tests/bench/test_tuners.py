"""Tests of the tuners in the harness: feasible proposals only, unique counting, determinism."""

from __future__ import annotations

import importlib.util

import pytest

from bench.ciq import engine_tuner
from bench.ciq import ray_tune_replay
from bench.peers import PEERS
from bench.replay import Problem

FAST = ["random", "optuna_tpe", "optuna_nsga2"]
if importlib.util.find_spec("kernel_tuner") is not None:
    FAST.append("kt_genetic_algorithm")


@pytest.mark.parametrize("name", FAST)
def test_peer_spends_its_budget_on_unique_feasible_configs(small: Problem, name: str) -> None:
    first = PEERS[name](small, 30, 1)
    assert len(first.seen) == 30  # Replay refuses infeasible proposals, so all are feasible
    assert first.trace == sorted(first.trace)
    again = PEERS[name](small, 30, 1)
    assert list(again.seen) == list(first.seen)


@pytest.mark.parametrize("strategy", ["auto", "screened", "random"])
def test_engine_tuner_is_deterministic(small: Problem, strategy: str) -> None:
    run = engine_tuner(strategy)
    first, again, other = run(small, 40, 3), run(small, 40, 3), run(small, 40, 4)
    assert len(first.seen) == 40
    assert list(first.seen) == list(again.seen)
    assert list(first.seen) != list(other.seen)


def test_screened_engine_beats_random_search(small: Problem) -> None:
    screened = [engine_tuner("screened")(small, 40, s).trace[-1] for s in range(4)]
    random = [PEERS["random"](small, 40, s).trace[-1] for s in range(4)]
    assert sum(screened) / 4 > sum(random) / 4


@pytest.mark.slow
def test_ray_tune_path_gives_the_same_evaluations(ray_cluster: None, small: Problem) -> None:
    via_ray = ray_tune_replay(small, 20, 5)
    direct = engine_tuner("auto")(small, 20, 5)
    assert list(via_ray.seen) == list(direct.seen)
    assert via_ray.trace == direct.trace
