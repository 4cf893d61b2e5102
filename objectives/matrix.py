"""Benchmark matrices: shapes grouped into the buckets that share a configuration, the order in
which buckets are tuned so that transfer pays, and the trainable of a multi-shape bucket."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ciq_tune.controls.matrix import SelectionRule
from ciq_tune.controls.matrix import log_distance
from objectives.description import KernelDescription
from objectives.description import Shape

GROUP_METRIC = "geomean_rel"
"""The metric of a multi-shape bucket's search: the weighted geometric mean over its shapes of
the metric relative to the baseline, oriented so that lower is better (``min``)."""
GUARD_STATUS = "worst_shape_guard"
"""Status of a candidate slower than ``worst_shape_limit`` × the baseline on some shape."""


@dataclass(frozen=True)
class ShapeGroup:
    """Shapes that share one configuration: a bucket of the selection rule.

    Attributes:
        key: The bucket's key sizes (``{}`` for mode ``one``; every size for ``per_shape``).
        shapes: The bucket's shapes, complete sizes with weights, in description order.
    """

    key: dict[str, int]
    shapes: tuple[Shape, ...]

    @property
    def weight(self) -> float:
        return sum(s.weight for s in self.shapes)

    def label(self) -> str:
        """``M=16`` (the key), ``all shapes`` for mode ``one``."""
        return ",".join(f"{k}={v}" for k, v in self.key.items()) or "all shapes"

    def distance(self, other: ShapeGroup) -> float:
        """The least log2 distance between a shape of this bucket and one of `other`."""
        return min(log_distance(a.sizes, b.sizes) for a in self.shapes for b in other.shapes)


def selection_rule(desc: KernelDescription) -> SelectionRule:
    """The launch-time rule of a description's matrix (``one`` without `shapes`)."""
    sel = desc.selection
    if sel is None:
        return SelectionRule(mode="one")
    key = sorted(desc.size_names(), key=list(desc.matrix()[0].sizes).index)
    return SelectionRule(
        mode=sel.mode,
        key=sel.key if sel.mode == "per_key" else key if sel.mode == "per_shape" else [],
        bucket=sel.bucket,
        worst_shape_limit=sel.worst_shape_limit if sel.mode != "per_shape" else None,
    )


def group_shapes(desc: KernelDescription) -> list[ShapeGroup]:
    """The description's shapes grouped by the bucket of their key sizes, in first-seen order."""
    rule = selection_rule(desc)
    groups: dict[tuple[tuple[str, int], ...], list[Shape]] = {}
    for shape in desc.matrix():
        groups.setdefault(tuple(rule.bucket_of(shape.sizes).items()), []).append(shape)
    return [ShapeGroup(dict(key), tuple(shapes)) for key, shapes in groups.items()]


def schedule(groups: Sequence[ShapeGroup]) -> list[ShapeGroup]:
    """The order to tune buckets in so that each one starts next to a tuned neighbour.

    First the medoid (least total log2 distance to the others: its winner is the best single
    guess for the rest), then repeatedly the untuned bucket nearest to any tuned one (ties:
    the heavier one first), so that every search after the first has a close winner to start
    from.
    """
    left = list(groups)
    if len(left) <= 1:
        return left
    first = min(left, key=lambda g: (sum(g.distance(o) for o in left), -g.weight))
    order = [first]
    left.remove(first)
    while left:
        nxt = min(left, key=lambda g: (min(g.distance(t) for t in order), -g.weight))
        order.append(nxt)
        left.remove(nxt)
    return order


def transfer_points(
    group: ShapeGroup, tuned: Sequence[tuple[ShapeGroup, Any]], *, limit: int
) -> list[Any]:
    """Winners of tuned buckets to start `group`'s search from, nearest bucket first.

    Args:
        group: The bucket about to be tuned.
        tuned: ``(bucket, winning configuration)`` of the buckets tuned so far.
        limit: Most configurations to return (distinct ones).
    """
    ranked = sorted(tuned, key=lambda gc: group.distance(gc[0]))
    points: list[Any] = []
    for _, config in ranked:
        if config not in points:
            points.append(config)
        if len(points) >= limit:
            break
    return points


def group_metric(desc: KernelDescription, group: ShapeGroup) -> tuple[str, str]:
    """``(metric, mode)`` the bucket's search optimises: the description's own metric for a
    single shape, `GROUP_METRIC` (minimised) for several."""
    return (desc.metric, desc.mode) if len(group.shapes) == 1 else (GROUP_METRIC, "min")


def relative(value: float, baseline: float, mode: str) -> float:
    """A metric relative to the baseline, lower is better: value/baseline for ``min``."""
    return value / baseline if mode == "min" else baseline / value


def combine(
    values: Sequence[float],
    baselines: Sequence[float],
    weights: Sequence[float],
    *,
    mode: str,
) -> tuple[float, float]:
    """``(weighted geometric mean, worst)`` of per-shape values relative to their baselines.

    Raises:
        ValueError: a value or baseline is not a positive finite number.
    """
    rel = []
    for value, base in zip(values, baselines, strict=True):
        if not (math.isfinite(value) and math.isfinite(base) and value > 0 and base > 0):
            raise ValueError(f"per-shape values must be positive and finite, got {value}/{base}")
        rel.append(relative(value, base, mode))
    total = sum(weights)
    geomean = math.exp(sum(w * math.log(r) for w, r in zip(weights, rel, strict=True)) / total)
    return geomean, max(rel)


def make_group_trainable(
    desc: KernelDescription,
    group: ShapeGroup,
    baselines: Sequence[float] | None,
    *,
    make_trainable: Callable[[KernelDescription], Callable[[dict[str, Any]], dict[str, Any]]],
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The trainable of one bucket.

    One shape: the kind's trainable at that shape. Several: each configuration is evaluated
    at every shape of the bucket; the result holds each shape's metric (``<metric>@<i>``) and
    `GROUP_METRIC`, NaN with status `GUARD_STATUS` when a shape is slower than
    ``worst_shape_limit`` × its baseline.

    Args:
        desc: The description (with its matrix).
        group: The bucket.
        baselines: The baseline configuration's metric at each shape of the bucket (required
            for several shapes).
        make_trainable: ``objectives.make_trainable`` (quiet), injected to keep imports down.
    """
    if len(group.shapes) == 1:
        return make_trainable(desc.at_shape(group.shapes[0]))
    if baselines is None or len(baselines) != len(group.shapes):
        raise ValueError("a multi-shape bucket needs one baseline value per shape")
    limit = desc.selection.worst_shape_limit if desc.selection else math.inf
    per_shape = [make_trainable(desc.at_shape(s)) for s in group.shapes]
    return functools.partial(
        _group_trial,
        per_shape,
        list(baselines),
        [s.weight for s in group.shapes],
        desc.metric,
        desc.mode,
        limit,
    )


def _group_trial(
    per_shape: Sequence[Callable[[dict[str, Any]], dict[str, Any]]],
    baselines: Sequence[float],
    weights: Sequence[float],
    metric: str,
    mode: str,
    limit: float,
    config: dict[str, Any],
) -> dict[str, Any]:
    out: dict[str, Any] = {"status": "ok", GROUP_METRIC: math.nan}
    values = []
    for index, trainable in enumerate(per_shape):
        result = trainable(config)
        value = result.get(metric)
        out[f"{metric}@{index}"] = value
        if result.get("status") != "ok" or not isinstance(value, int | float):
            # The first failing shape says why; the remaining shapes are not worth running.
            out["status"] = result.get("status", "crash")
            out["error"] = f"shape {index}: {result.get('error', '')}"
            return out
        values.append(float(value))
    geomean, worst = combine(values, baselines, weights, mode=mode)
    out["worst_rel"] = worst
    if worst > limit:
        out["status"] = GUARD_STATUS
        out["error"] = f"worst shape at {worst:.3f}x the baseline (limit {limit})"
        return out
    out[GROUP_METRIC] = geomean
    return out


def shape_values(result: Mapping[str, Any], metric: str, n: int) -> list[float | None]:
    """Per-shape metric values of a multi-shape result (None where a shape did not run)."""
    values: list[float | None] = []
    for i in range(n):
        value = result.get(f"{metric}@{i}")
        values.append(float(value) if isinstance(value, int | float) else None)
    return values
