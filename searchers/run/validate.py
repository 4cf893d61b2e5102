"""The end of a run: the search's top-k re-measured against the baseline (on the benchmark
servers that timed the search, in a Ray task holding a GPU, or in this process), or the reason
it was skipped."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.errors import CiqTuneError
from searchers.run.options import VALIDATE_TOP
from searchers.run.outputs import NO_GPU_REASON
from searchers.run.setup import local_gpus

if TYPE_CHECKING:
    from ciq_tune.validation import SearchValidation
    from ciq_tune.validation import ValidationConfig


def validation_config(repetitions: int | None, simplify_params: bool) -> ValidationConfig:
    """The top-k validation's settings (`repetitions` None: the default).

    Raises:
        CiqTuneError: `repetitions` breaks the settings' rule.
    """
    from pydantic import ValidationError

    from ciq_tune.validation import VALIDATION_DEFAULTS
    from ciq_tune.validation import ValidationConfig

    if repetitions is None:
        repetitions = VALIDATION_DEFAULTS["repetitions"]
    try:
        return ValidationConfig(repetitions=repetitions, simplify_params=simplify_params)
    except ValidationError as exc:
        raise CiqTuneError(
            f"`--validate-repetitions`={repetitions}: {exc.errors()[0]['msg']}"
        ) from exc


def validate_best(
    desc: Any,
    results: Any,
    baseline: Any,
    top_k: int | None,
    settings: ValidationConfig,
    *,
    measure: Callable[[Any], float] | None = None,
) -> SearchValidation:
    """Re-measure the search's top-k against the baseline, or say why not: with `measure`
    (one round on the search's benchmark worker) in this process, else with fresh evaluations
    in a Ray task holding a GPU (while Ray is up) or, without Ray, in this process."""
    from ciq_tune.controls.simplify import validate_and_simplify
    from ciq_tune.validation import RoundCounter
    from ciq_tune.validation import SearchValidation
    from objectives import make_measure
    from objectives import measurement_is_exact
    from searchers.placement import ray_is_up

    k = VALIDATE_TOP if top_k is None else top_k
    on_ray = ray_is_up()
    skip = None
    if desc.kind in ("triton", "helion") and not _gpus_here(on_ray):
        skip = NO_GPU_REASON
    elif measurement_is_exact(desc):
        skip = (
            f"{desc.metric} is a compile statistic that a fresh ptxas run reproduces exactly "
            "(same PTX, options and ptxas version, all recorded here): no noise to test"
        )
    elif k < 1:
        skip = f"switched off (--validate-top {k})"
    elif not any(r.ok and r.config == baseline for r in results.records):
        skip = "the baseline did not run successfully, so there is nothing to compare with"
    if skip is not None:
        return SearchValidation(outcome="skipped", reason=skip, top_k=k, baseline_config=baseline)
    rounds = measure or make_measure(desc)
    if measure is not None:
        from objectives.served_rounds import SERVED_WARMUP_ROUNDS

        settings = settings.model_copy(
            update={"warmup": min(settings.warmup, SERVED_WARMUP_ROUNDS)}
        )
    print(
        f"validating the top {k} against the baseline: {settings.warmup} warm-up and up to "
        f"{settings.repetitions} timed interleaved repetitions each, stopping at the first of "
        f"{len(settings.look_rounds())} looks that decides …",
        flush=True,
    )

    def validate_top(measure: Callable[[Any], float] = rounds) -> SearchValidation:
        # Only what earns its place: each control of the winner, re-measured without it.
        return validate_and_simplify(results, measure, baseline, k=k, config=settings)

    if measure is not None or not on_ray:
        counter, started = RoundCounter(), time.perf_counter()
        here = validate_top(counter.counted(rounds))
        print(f"validation: {counter.summary(time.perf_counter() - started)}", flush=True)
        return here
    import ray

    # A timed kind needs a GPU: on a cluster with GPUs the task asks for one, so it lands on a
    # GPU node and (the search being over) has that GPU to itself.
    gpus = 1 if desc.kind != "ptx" and ray.cluster_resources().get("GPU", 0) >= 1 else 0
    validation: SearchValidation = ray.get(
        ray.remote(num_cpus=1, num_gpus=gpus)(validate_top).remote()
    )
    return validation


def _gpus_here(on_ray: bool) -> bool:
    """Whether the search's cluster (Ray's, or this machine) has a GPU."""
    if on_ray:
        import ray

        return bool(ray.cluster_resources().get("GPU", 0))
    return local_gpus() > 0


def served_measure_of(desc: Any, benchmark: Any) -> Callable[[Any], float]:
    """One round of a configuration on `benchmark`'s worker, with the search's protocol."""
    from objectives import benchmark_worker_setup
    from objectives.served_rounds import served_measure

    preload, _ = benchmark_worker_setup(desc.kind)
    return served_measure(desc, benchmark, preload=preload)
