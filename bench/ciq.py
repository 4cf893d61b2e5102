"""Our engine in the replay harness: directly (ask/tell) and through Ray Tune's searcher."""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from bench.peers import Tuner
from bench.replay import BenchError
from bench.replay import Problem
from bench.replay import Replay
from ciq_tune.engine import Budget
from ciq_tune.engine import Engine
from ciq_tune.engine import Objective
from ciq_tune.engine import SearchResults
from ciq_tune.engine import create_engine

METRIC = "time_ms"
# Engine strategies the harness runs, by tuner name.
ENGINE_TUNERS = {
    "ciq": "auto",
    "ciq_ga": "ga",
    "ciq_screened": "screened",
    "ciq_random": "random",
}


def engine_tuner(
    strategy: str,
    config: Mapping[str, Any] | None = None,
    transfer: Callable[[Problem, int], SearchResults] | None = None,
    until: float | None = None,
) -> Tuner:
    """A tuner driving `create_engine(strategy, ...)` by ask/tell, one evaluation at a time.

    Args:
        strategy: an engine strategy name ("auto", "ga", …).
        config: strategy settings (its `EngineConfig` fields); the strategy's defaults if None.
        transfer: the earlier search a run of a problem with a seed starts from
            (`bench.transfer.EarlierSearch`); None starts from scratch.
        until: stop each run once its best is within this fraction of the optimum.
    """

    def run(problem: Problem, budget: int, seed: int) -> Replay:
        replay = Replay(problem, budget)
        engine = create_engine(
            strategy,
            problem.space,
            [Objective(name=METRIC, mode="min")],
            config=dict(config or {}),
            budget=Budget(max_evaluations=replay.budget),
            seed=seed,
            transfer_from=None if transfer is None else transfer(problem, seed),
        )
        drive(engine, replay, until)
        return replay

    return run


def drive(engine: Engine, replay: Replay, until: float | None = None) -> None:
    """Ask, evaluate on the record and tell until the engine has finished, or until the best
    is within `until` (a fraction) of the optimum."""
    while not engine.finished:
        if until is not None and replay.trace and replay.trace[-1] >= until - 1e-12:
            return
        candidate = engine.ask()
        if candidate is None:
            raise BenchError(
                f"engine {engine.name!r} returned no candidate with nothing out for evaluation"
            )
        time = replay.evaluate(candidate.config)
        if time is None:
            engine.tell(candidate.id, None, status="error")
        else:
            engine.tell(candidate.id, {METRIC: time})


def ray_tune_replay(problem: Problem, budget: int, seed: int, *, strategy: str = "auto") -> Replay:
    """Run the engine through Ray Tune: `CompileIQSearcher` proposes, a replay trainable
    answers from the record (one trial at a time, so the order is deterministic).

    Ray must already be initialised (e.g. ``ray.init(num_cpus=2)``).
    """
    from ray import tune

    from searchers.compileiq_searcher import CompileIQSearcher

    times = dict(problem.times)
    params = problem.params

    def trainable(config: dict[str, Any]) -> dict[str, Any]:
        time = times[tuple(config[p] for p in params)]
        if time is None:  # Tune requires the metric in every result; the status marks failure
            return {METRIC: math.nan, "status": "error"}
        return {METRIC: time}

    searcher = CompileIQSearcher(
        space=problem.space,
        metric=METRIC,
        mode="min",
        strategy=strategy,
        max_evaluations=min(budget, len(problem.feasible)),
        seed=seed,
    )
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            num_samples=-1,
            max_concurrent_trials=1,
            reuse_actors=True,  # one Ray worker for the run, not one per replayed evaluation
        ),
    )
    tuner.fit()
    replay = Replay(problem, budget)
    for record in sorted(searcher.results().records, key=lambda r: r.candidate_id):
        replay.evaluate(record.config)
    return replay
