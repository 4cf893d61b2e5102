"""A matrix bucket's winner re-measured: its top candidates against the baseline, each
measurement the weighted geometric mean over the bucket's shapes (`BucketMeasure`), its rounds
on the search's benchmark worker, in a Ray task holding a GPU, or in a fresh evaluation
(`BucketRounds`)."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any

from ciq_tune.controls.simplify import validate_and_simplify
from ciq_tune.errors import MeasurementError
from ciq_tune.results import SearchResults
from ciq_tune.validation import RoundCounter
from ciq_tune.validation import SearchValidation
from ciq_tune.validation import ValidationConfig
from objectives import make_measure
from objectives import measurement_is_exact
from objectives._arrays import arrays_for
from objectives._bench import timing_sets
from objectives._stages import Benchmarker
from objectives.description import KernelDescription
from objectives.matrix import ShapeGroup
from objectives.matrix import relative
from objectives.protocol import DEFAULT_PROTOCOL
from objectives.remeasure import ConfigRounds
from objectives.served_rounds import SERVED_WARMUP_ROUNDS
from objectives.served_rounds import served_measure
from searchers.placement import ray_is_up

Timer = Callable[[], float]


def config_key(config: Any) -> str:
    """A configuration as a key: its JSON with sorted keys."""
    return json.dumps(config, sort_keys=True)


def validate_bucket(
    desc: KernelDescription,
    group: ShapeGroup,
    results: SearchResults,
    baseline: dict[str, Any],
    references: list[float | None],
    rounds: BucketRounds,
    *,
    top_k: int,
    config: ValidationConfig,
) -> SearchValidation:
    """Re-measure a bucket's `top_k` candidates against the baseline (as a run of one shape
    does), or say why not; `references`: the baseline's search values at the bucket's
    shapes."""
    skip = None
    if measurement_is_exact(desc):
        skip = f"{desc.metric} is a compile statistic that a recompile reproduces exactly"
    elif top_k < 1:
        skip = f"switched off (validate_top={top_k})"
    elif not any(r.ok and r.config == baseline for r in results.records):
        skip = "the baseline did not run successfully, so there is nothing to compare with"
    if skip is not None:
        return SearchValidation(
            outcome="skipped", reason=skip, top_k=top_k, baseline_config=baseline
        )
    measure = BucketMeasure(desc, group, references, rounds.timer)
    if rounds.served:
        config = config.model_copy(update={"warmup": min(config.warmup, SERVED_WARMUP_ROUNDS)})
    validate = functools.partial(validate_and_simplify, k=top_k, config=config)
    return rounds.run(validate, results, measure, baseline)


class BucketRounds:
    """Where a matrix's validation rounds run: one round per request on the search's benchmark
    worker (`objectives.served_rounds`) when it had one; else, on a GPU, rounds in a Ray task
    that holds it (`objectives.remeasure.ConfigRounds`, the in-trial protocol); else fresh
    evaluations in the isolated worker (`objectives.make_measure`)."""

    def __init__(self, desc: KernelDescription, benchmark: Benchmarker | None) -> None:
        self._benchmark = benchmark
        self.served = benchmark is not None
        self.counter = RoundCounter()  # the rounds run in this process
        self._preload = _preload(desc.kind) if benchmark is not None else ()
        self._gpus = 0
        if benchmark is None and ray_is_up() and desc.kind != "ptx":
            import ray

            self._gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0

    def timer(self, at: KernelDescription, config: Any) -> Timer:
        """The rounds of `config` at one shape (built where they run), counted."""
        timer: Timer
        if self._benchmark is not None:
            timer = functools.partial(
                served_measure(at, self._benchmark, preload=self._preload), config
            )
        elif self._gpus and at.metric == "time_ms":
            sets = timing_sets(
                at, device="cuda", protocol=DEFAULT_PROTOCOL, arrays=arrays_for(at.kind)
            )
            timer = ConfigRounds(at, config, sets, device="cuda", protocol=DEFAULT_PROTOCOL)
        else:
            timer = functools.partial(make_measure(at), config)
        return self.counter.counted(timer)

    def run(self, fn: Callable[..., SearchValidation], *args: Any) -> SearchValidation:
        """`fn(*args)`: here, or in a Ray task holding a GPU for rounds in this process."""
        if not self._gpus:
            return fn(*args)
        import ray

        task = ray.remote(num_cpus=1, num_gpus=self._gpus)(_call)
        validation: SearchValidation = ray.get(task.remote(fn, *args))
        return validation


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    # ray.remote takes functions, not partials: the callable travels as an argument.
    return fn(*args)


def _preload(kind: str) -> tuple[str, ...]:
    from objectives import benchmark_worker_setup

    return benchmark_worker_setup(kind)[0]


class BucketMeasure:
    """One fresh measurement of a configuration on a bucket (`validate_search`'s measure): the
    shape's metric, or the weighted geometric mean of the shapes' metrics relative to the
    baseline's search values (a fixed scale, so ratios between configurations are those of
    `bucket_score`). Each shape's rounds come from `timer_for(shape description, config)`
    (`BucketRounds.timer`), built on first use where the measure runs."""

    def __init__(
        self,
        desc: KernelDescription,
        group: ShapeGroup,
        references: list[float | None],
        timer_for: Callable[[KernelDescription, Any], Timer],
    ) -> None:
        self._shapes = [desc.at_shape(shape) for shape in group.shapes]
        self._weights = [shape.weight for shape in group.shapes]
        self._references = references
        self._timer_for = timer_for
        self._timers: dict[tuple[str, int], Timer] = {}
        self._mode = desc.mode

    def _timer(self, config: Any, i: int) -> Timer:
        key = (config_key(config), i)
        if key not in self._timers:
            self._timers[key] = self._timer_for(self._shapes[i], config)
        return self._timers[key]

    def __call__(self, config: Any) -> float:
        values = [self._timer(config, i)() for i in range(len(self._shapes))]
        if len(values) == 1:
            return values[0]
        log_sum = 0.0
        for at, weight, value, base in zip(
            self._shapes, self._weights, values, self._references, strict=True
        ):
            if value <= 0:
                raise MeasurementError(f"{at.name}: non-positive {at.metric}={value} at {at.sizes}")
            log_sum += weight * math.log(relative(value, base or 1.0, self._mode))
        return math.exp(log_sum / sum(self._weights))
