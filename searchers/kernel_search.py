"""A kernel search on the connected Ray cluster: placement, `CompileIQSearcher` and the Tuner.

The `tune` command and the GPU benchmark scripts run the same search; they differ only in
budgets, output folders and what they do with the results.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import ray
from ray import tune

from ciq_tune.space import SearchSpace
from searchers.compileiq_searcher import CompileIQSearcher
from searchers.placement import Placement
from searchers.placement import plan_placement


def placement_on_cluster(kind: str, trials_per_gpu: int = 1) -> Placement:
    """`plan_placement` for the GPUs and CPUs of the cluster `ray.init` connected to."""
    cluster = ray.cluster_resources()
    return plan_placement(
        kind,
        cluster_gpus=cluster.get("GPU", 0),
        cluster_cpus=cluster.get("CPU", 1),
        trials_per_gpu=trials_per_gpu,
    )


def kernel_tuner(
    trainable: Callable[[dict[str, Any]], Any],
    placement: Placement,
    *,
    space: SearchSpace,
    metric: str,
    mode: str,
    max_evaluations: int,
    seed: int,
    points_to_evaluate: Sequence[Mapping[str, Any]],
    run_config: tune.RunConfig,
    time_budget_s: float | None = None,
    strategy: str = "auto",
) -> tuple[tune.Tuner, CompileIQSearcher]:
    """The Tuner of a kernel search and its searcher (for its results after `fit`).

    Trials get `placement`'s resources; actors are reused, which keeps each trial slot's
    isolated benchmark worker warm (~4.5 s to start on an H100). With several GPU trials at a
    time the engine proposes whenever one ends, rather than waiting for a generation's slowest
    compile.
    """
    searcher = CompileIQSearcher(
        space=space,
        metric=metric,
        mode=mode,
        strategy=strategy,
        max_evaluations=max_evaluations,
        time_budget_s=time_budget_s,
        seed=seed,
        points_to_evaluate=points_to_evaluate,
        engine_config={"steady_state": True} if placement.steady_state else None,
    )
    tuner = tune.Tuner(
        tune.with_resources(trainable, placement.resources),
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            num_samples=-1,
            reuse_actors=True,
            # Without it Tune keeps one trial pending for a custom searcher: one at a time.
            max_concurrent_trials=placement.max_concurrent_trials,
        ),
        run_config=run_config,
    )
    return tuner, searcher
