"""When a `CompileIQSearcher` stops: the budget given, else Tune's `num_samples`, else a
convergence stop; the line that says so; and the warning when Tune would start its trials one
at a time."""

from __future__ import annotations

import logging

from ciq_tune.engine import Budget

logger = logging.getLogger("searchers.compileiq_searcher")

CONVERGENCE_GENERATIONS = 20
"""With no budget and no positive `num_samples` from Tune, the search stops after this many
generations without a better result (its convergence stop; it would otherwise never end)."""


def effective_budget(given: Budget, num_samples: int | None) -> Budget:
    """The budget given, else Tune's `num_samples`, else the convergence stop."""
    if any(v is not None for v in given.model_dump().values()):
        return given
    if num_samples is not None and num_samples > 0:
        return Budget(max_evaluations=num_samples)
    return Budget(stagnation_generations=CONVERGENCE_GENERATIONS)


def budget_note(given: Budget, num_samples: int | None, pool: int | None) -> str:
    """One line saying when the search stops (`pool`: the engine's pool size, once known)."""
    limits = {k: v for k, v in given.model_dump().items() if v is not None}
    pool_text = f"pool_size={pool}" if pool is not None else "the strategy's pool_size"
    if limits:
        text = ", ".join(f"{k}={v}" for k, v in limits.items())
        return f"budget {text} ({pool_text}); the first limit reached ends the search"
    if num_samples is not None and num_samples > 0:
        return f"budget: Tune's num_samples={num_samples} evaluations"
    return (
        f"no budget given and Tune's num_samples is {num_samples or 'not known'}: "
        f"the search stops after {CONVERGENCE_GENERATIONS} generations ({pool_text}) "
        "without improvement; pass max_evaluations= or num_samples for a fixed count"
    )


def warn_if_serial() -> None:
    """Warn when Tune will start a searcher's trials one at a time although the cluster has
    more CPUs (Tune keeps one pending trial for a custom searcher unless
    `max_concurrent_trials` is set: trials shorter than a worker's start then never
    overlap)."""
    import ray

    cpus = int(ray.cluster_resources().get("CPU", 0)) if ray.is_initialized() else 0
    if cpus > 1:
        logger.warning(
            "CompileIQSearcher: Tune starts trials one at a time because "
            "TuneConfig(max_concurrent_trials=...) is not set, while this cluster has %d "
            "CPUs (trials overlap only when each outlasts a worker's start); set "
            "max_concurrent_trials=%d (or the number of trials that fit at once) to run "
            "them in parallel",
            cpus,
            cpus,
        )
