"""Peer tuners run in the replay harness: random search, Optuna samplers, Kernel Tuner strategies.

Accounting, the same for every tuner: only feasible configurations are evaluated and counted;
each unique configuration costs one evaluation (a recorded failure included); a repeated one is
answered from the record for free. Optuna proposes over the Cartesian product: a proposal that
breaks the restrictions is told to Optuna as +inf and not counted (reject and resample, with the
sampler learning the infeasible region for free, as a constraint-aware tuner does); a recorded
failure is told as +inf and counted. (Telling Optuna a failed trial instead teaches it nothing:
on kt_rtx convolution TPE then makes ~30 infeasible proposals per evaluation.) Kernel Tuner
checks its restrictions itself and counts unique evaluations the same way.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.replay import BenchError
from bench.replay import Problem
from bench.replay import Replay

Tuner = Callable[[Problem, int, int], Replay]
# Proposals per unit of budget after which a tuner that keeps repeating itself or proposing
# infeasible configurations is stopped (its trace is padded with its best value).
MAX_PROPOSALS_PER_EVAL = 50


def run_random(
    problem: Problem, budget: int, seed: int, start: Sequence[Mapping[str, Any]] = ()
) -> Replay:
    """Uniform random search over the feasible set, without replacement, after the `start`
    configurations (a warm start)."""
    replay = Replay(problem, budget)
    for config in start[: replay.budget]:
        replay.evaluate(config)
    rng = np.random.default_rng(seed)
    for index in rng.permutation(len(problem.feasible)):
        if replay.finished:
            break
        replay.evaluate(problem.config(problem.feasible[int(index)]))
    return replay


def _run_optuna(
    problem: Problem, budget: int, sampler: Any, start: Sequence[Mapping[str, Any]]
) -> Replay:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    for config in start:  # Optuna's warm start: evaluated first, then learned from
        study.enqueue_trial(dict(config))
    replay = Replay(problem, budget)
    choices = {
        p: sorted({k[i] for k in problem.feasible}, key=repr) for i, p in enumerate(problem.params)
    }
    proposals = 0
    while not replay.finished and proposals < MAX_PROPOSALS_PER_EVAL * replay.budget:
        proposals += 1
        trial = study.ask()
        config = {p: trial.suggest_categorical(p, choices[p]) for p in problem.params}
        if problem.key(config) not in problem.times:
            study.tell(trial, math.inf)
            continue
        time = replay.evaluate(config)
        study.tell(trial, math.inf if time is None else time)
    return replay


def run_optuna_tpe(
    problem: Problem, budget: int, seed: int, start: Sequence[Mapping[str, Any]] = ()
) -> Replay:
    """Optuna's default sampler (TPE, default settings), categorical parameters; the `start`
    configurations first (enqueued trials)."""
    import optuna

    return _run_optuna(problem, budget, optuna.samplers.TPESampler(seed=seed), start)


def run_optuna_nsga2(
    problem: Problem, budget: int, seed: int, start: Sequence[Mapping[str, Any]] = ()
) -> Replay:
    """Optuna's NSGA-II sampler on one objective (a genetic algorithm), default settings; the
    `start` configurations first (enqueued trials)."""
    import optuna

    return _run_optuna(problem, budget, optuna.samplers.NSGAIISampler(seed=seed), start)


def _kernel_tuner_cache(problem: Problem, path: Path) -> None:
    """A Kernel Tuner cache of the feasible set (simulation mode needs every feasible config;
    an unmeasured one is stored as failed, as the harness counts it)."""
    tune_params = {
        p: sorted({k[i] for k in problem.feasible}) for i, p in enumerate(problem.params)
    }
    cache: dict[str, Any] = {}
    for key in problem.feasible:
        time = problem.times[key]
        entry: dict[str, Any] = problem.config(key)
        entry["time"] = "RuntimeFailedConfig" if time is None else time
        entry.update(compile_time=0.0, verification_time=0.0, benchmark_time=0.0)
        if time is not None:
            entry["times"] = [time]
        cache[",".join(str(v) for v in key)] = entry
    data = {
        "device_name": "replay",
        "kernel_name": "replay",
        "problem_size": [1, 1, 1],
        "tune_params_keys": list(problem.params),
        "tune_params": tune_params,
        "objective": "time",
        "cache": cache,
    }
    path.write_text(json.dumps(data))


def kernel_tuner_tuner(strategy: str) -> Tuner:
    """A tuner running Kernel Tuner's `strategy` in simulation mode on the replayed space."""

    def run(problem: Problem, budget: int, seed: int) -> Replay:
        try:
            from kernel_tuner.interface import tune_cache
        except ImportError as exc:
            raise BenchError(
                "Kernel Tuner peers need the `bench` extra: pip install 'ciq-tune[bench]'"
            ) from exc
        import random as stdlib_random
        import warnings

        # Kernel Tuner's strategies draw from the global generators; seed them for the run.
        np.random.seed(seed)
        stdlib_random.seed(seed)
        replay = Replay(problem, budget)
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cache = Path(tmp) / "cache.json"
            _kernel_tuner_cache(problem, cache)
            results, _ = tune_cache(
                str(cache),
                strategy=strategy,
                strategy_options={"max_fevals": replay.budget},
                verbose=False,
                quiet=True,
            )
        for result in results:
            if replay.finished:
                break
            replay.evaluate({p: result[p] for p in problem.params})
        return replay

    return run


KERNEL_TUNER_STRATEGIES = (
    "genetic_algorithm",
    "simulated_annealing",
    "greedy_ils",
    "diff_evo",
    "pso",
    "dual_annealing",
    "basinhopping",
    "firefly_algorithm",
)

PEERS: dict[str, Tuner] = {
    "random": run_random,
    "optuna_tpe": run_optuna_tpe,
    "optuna_nsga2": run_optuna_nsga2,
    **{f"kt_{s}": kernel_tuner_tuner(s) for s in KERNEL_TUNER_STRATEGIES},
}
