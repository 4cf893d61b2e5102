"""A kernel search on the connected Ray cluster: placement, `CompileIQSearcher` and the Tuner.

The `tune` command and the GPU benchmark scripts run the same search; they differ only in
budgets, output folders and what they do with the results.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray import tune

from ciq_tune.space import SearchSpace
from ciq_tune.validation.noise_aware import CONFIRM_ROUNDS
from ciq_tune.validation.noise_aware import NOISE
from ciq_tune.validation.noise_aware import PATIENCE
from objectives import STAGED_KINDS
from objectives import benchmark_worker_setup
from objectives import make_trainable
from objectives import measurement_is_exact
from objectives._stages import Benchmarker
from objectives.description import KernelDescription
from searchers.benchmark_pool import BenchmarkPool
from searchers.compileiq_searcher import CompileIQSearcher
from searchers.noise_aware import noise_aware
from searchers.placement import BENCHMARK_MODES
from searchers.placement import Placement
from searchers.placement import plan_placement
from searchers.plan import SearchPlan


def logged_trainable(
    description: KernelDescription, *, benchmark: Benchmarker | None = None
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The description's trainable, printing each trial's id, configuration and result.

    Ray keeps a trial actor's stdout as its log (browsable in the Ray dashboard); Tune names
    trials and their actors after the description. `benchmark`: see
    `objectives.make_trainable`.
    """
    printed = functools.partial(_printed_trial, make_trainable(description, benchmark=benchmark))
    printed.__name__ = description.name  # type: ignore[attr-defined]
    return printed


def _printed_trial(
    trainable: Callable[[dict[str, Any]], dict[str, Any]], config: dict[str, Any]
) -> dict[str, Any]:
    trial_id = tune.get_context().get_trial_id()
    print(f"[ciq-tune] trial {trial_id} config {json.dumps(config, sort_keys=True)}", flush=True)
    result = trainable(config)
    summary = json.dumps(result, sort_keys=True, default=str)
    print(f"[ciq-tune] trial {trial_id} result {summary}", flush=True)
    return result


def placement_on_cluster(
    kind: str, trials_per_gpu: int | None = None, *, staged: bool = False
) -> Placement:
    """`plan_placement` for the GPUs and CPUs of the cluster `ray.init` connected to."""
    cluster = ray.cluster_resources()
    return plan_placement(
        kind,
        cluster_gpus=cluster.get("GPU", 0),
        cluster_cpus=cluster.get("CPU", 1),
        trials_per_gpu=trials_per_gpu,
        staged=staged,
    )


def uses_benchmark_pool(kind: str, mode: str) -> bool:
    """Whether a search of `kind` in benchmark `mode` (`BENCHMARK_MODES`) times its candidates
    on per-GPU benchmark servers.

    Raises:
        ValueError: an unknown `mode`, or ``per-gpu`` for a kind that cannot be staged.
    """
    if mode not in BENCHMARK_MODES:
        raise ValueError(f"`benchmark` must be one of {tuple(BENCHMARK_MODES)}, got {mode!r}")
    if mode == "per-gpu" and kind not in STAGED_KINDS:
        raise ValueError(
            f"`benchmark`='per-gpu' needs a kind of {STAGED_KINDS} (the others compile and time "
            f"in one step), got kind={kind!r}"
        )
    if mode == "auto":
        return kind in STAGED_KINDS and ray.cluster_resources().get("GPU", 0) >= 1
    return mode == "per-gpu"


def start_benchmark_pool(kind: str, *, gpus: int | None = None) -> BenchmarkPool:
    """One warm benchmark server per GPU of the cluster for kernels of `kind`."""
    preload, cpu_env = benchmark_worker_setup(kind)
    return BenchmarkPool.start(gpus=gpus, preload=preload, cpu_env=cpu_env)


def kernel_tuner(
    trainable: Callable[[dict[str, Any]], Any],
    placement: Placement,
    plan: SearchPlan,
    run_config: tune.RunConfig,
) -> tuple[tune.Tuner, CompileIQSearcher]:
    """The Tuner of a kernel search (`plan`) and its searcher (for its results after `fit`).

    Trials get `placement`'s resources; actors are reused, which keeps each trial slot's
    isolated benchmark worker warm (~4.5 s to start on an H100). With several GPU trials at a
    time the engine proposes whenever one ends, rather than waiting for a generation's slowest
    compile.
    """
    steady = {"steady_state": True} if placement.steady_state else None
    searcher = CompileIQSearcher(**vars(plan), engine_config=steady)
    tuner = tune.Tuner(
        tune.with_resources(trainable, placement.resources),
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            # The searcher ends the run (its budget); Tune's own count is the same number, so
            # its banner says how many trials there will be at most.
            num_samples=plan.max_evaluations,
            reuse_actors=True,
            # Without it Tune keeps one trial pending for a custom searcher: one at a time.
            max_concurrent_trials=placement.max_concurrent_trials,
        ),
        run_config=run_config,
    )
    return tuner, searcher


# Result keys kept from every trial of `run_search` (metrics of the objectives and of Ray).
TRIAL_KEYS = (
    "status",
    "error",
    "iqr_ms",
    "cv",
    "n",
    "sm_clock_mhz",
    "temperature_c",
    "search_rounds",
    "first_round",
    "compile_s",
    "gpu_s",
    "gpu_wait_s",
    "worker_spawn_s",
    "wall_s",
    "time_total_s",
    "timestamp",
    "n_regs",
    "n_spills",
    "rel_err",
)


@dataclass
class SearchRun:
    """A finished kernel search.

    Attributes:
        trials: one dict per evaluation: ``config``, the metric and `TRIAL_KEYS`.
        best: the best ``ok`` trial by the search's own (confirmed) value, None when none ran.
        wall_s: seconds of `Tuner.fit`.
        placement: how trials were placed.
    """

    trials: list[dict[str, Any]]
    best: dict[str, Any] | None
    wall_s: float
    placement: Placement

    def top(self, k: int, metric: str, mode: str) -> list[dict[str, Any]]:
        """The `k` best ``ok`` trials with distinct configurations, best first."""
        sign = 1 if mode == "min" else -1
        ok = [t for t in self.trials if t.get("status") == "ok" and _finite(t.get(metric))]
        out: list[dict[str, Any]] = []
        for t in sorted(ok, key=lambda t: sign * float(t[metric])):
            if all(t["config"] != o["config"] for o in out):
                out.append(t)
        return out[:k]


def run_search(
    trainable: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    space: SearchSpace,
    metric: str,
    mode: str,
    kind: str,
    budget: int,
    seed: int,
    points_to_evaluate: Sequence[Mapping[str, Any]],
    run_config: tune.RunConfig,
    trials_per_gpu: int = 1,
    time_budget_s: float | None = None,
    noise: NoiseSettings | None = None,
) -> SearchRun:
    """One kernel search on the connected Ray cluster, optionally noise-aware.

    Args:
        trainable: ``trainable(config) -> result`` (`objectives.make_trainable`).
        space: The search space; `points_to_evaluate` are evaluated first.
        metric: The result key searched; `mode` its direction.
        kind: The description's kind (placement: GPU kinds share GPUs).
        budget: Evaluations (confirmation rounds of a noise-aware search are not counted).
        seed: The engine's seed.
        run_config: Ray Tune's run configuration (name, storage); a noise-aware search adds
            its `ConvergenceStopper` to it.
        trials_per_gpu: Trials sharing one GPU.
        time_budget_s: Stop after this many seconds.
        noise: Confirm candidates within noise of the best and stop on convergence
            (`searchers.noise_aware`); None: every evaluation is one round.
    """
    placement = placement_on_cluster(kind, trials_per_gpu)
    if noise is not None:
        trainable, stopper = noise_aware(
            trainable,
            metric=metric,
            mode=mode,
            noise=noise.noise,
            confirm_rounds=noise.confirm_rounds,
            patience=noise.patience,
        )
        run_config = dataclasses.replace(run_config, stop=stopper)
    plan = SearchPlan(
        space, metric, mode, budget, seed, points_to_evaluate, time_budget_s=time_budget_s
    )
    tuner, _ = kernel_tuner(trainable, placement, plan, run_config)
    t0 = time.perf_counter()
    grid = tuner.fit()
    wall_s = time.perf_counter() - t0
    trials = []
    for i in range(len(grid)):
        metrics = grid[i].metrics or {}
        record = {"config": grid[i].config, metric: metrics.get(metric)}
        record.update({k: metrics[k] for k in TRIAL_KEYS if k in metrics})
        if "error" in record:
            record["error"] = str(record["error"])[:300]
        trials.append(record)
    run = SearchRun(trials=trials, best=None, wall_s=wall_s, placement=placement)
    top = run.top(1, metric, mode)
    run.best = top[0] if top else None
    return run


@dataclass(frozen=True)
class NoiseSettings:
    """How a search treats timing noise (`searchers.noise_aware.noise_aware`)."""

    noise: float = NOISE
    confirm_rounds: int = CONFIRM_ROUNDS
    patience: int = PATIENCE


def kernel_trainable(
    desc: KernelDescription,
    *,
    noise: NoiseSettings | None = None,
    benchmark: Benchmarker | None = None,
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The description's trainable (call after `ray.init`), noise-aware
    (`searchers.noise_aware`: candidates within noise of the best are confirmed) unless a fresh
    evaluation reproduces its metric exactly (`objectives.measurement_is_exact`). The
    convergence stop is not used here: `noise.patience` is ignored (`run_search` has it).
    Each trial prints its id, configuration and result (`logged_trainable`); `benchmark`: see
    `objectives.make_trainable`."""
    trainable = logged_trainable(desc, benchmark=benchmark)
    if measurement_is_exact(desc):
        return trainable
    noise = noise or NoiseSettings()
    wrapped, _ = noise_aware(
        trainable,
        metric=desc.metric,
        mode=desc.mode,
        noise=noise.noise,
        confirm_rounds=noise.confirm_rounds,
    )
    return wrapped


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
