"""Benchmark matrices: one evaluation is one configuration timed at every shape of the matrix.

A trial sends one configuration with the whole matrix; the kind's worker compiles it once per
distinct set of compile-time values (`compile_key`) and times it at each shape, each shape with
its own status, so a shape that fails loses none of the others. The search optimises the
weighted geometric mean over the shapes (`matrix_metric`); the winner of each bucket of the
selection rule (a shape, a key, or the whole matrix) is then the best configuration for that
bucket over everything evaluated (`bucket_scores`), so every bucket profits from every
evaluation.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ciq_tune.controls.matrix import SelectionRule
from ciq_tune.controls.matrix import log_distance
from ciq_tune.results import finite_number
from objectives.description import KernelDescription
from objectives.description import Shape
from objectives.protocol import CUT_TIMER

GUARD_STATUS = "worst_shape_guard"
"""Status of a bucket's candidate slower than ``worst_shape_limit`` × the baseline on one of
the bucket's shapes."""
NATIVE_MATRIX_KINDS = ("triton",)
"""Kinds whose worker evaluates the whole matrix in one request; the others run one worker call
per shape (`each_shape`)."""


@dataclass(frozen=True)
class ShapeGroup:
    """Shapes that share one configuration: a bucket of the selection rule.

    Attributes:
        key: The bucket's key sizes (``{}`` for mode ``one``; every size for ``per_shape``).
        shapes: The bucket's shapes, complete sizes with weights, in description order.
        indices: The shapes' positions in the description's matrix (``time_ms@<i>``).
    """

    key: dict[str, int]
    shapes: tuple[Shape, ...]
    indices: tuple[int, ...]

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
    groups: dict[tuple[tuple[str, int], ...], list[tuple[int, Shape]]] = {}
    for index, shape in enumerate(desc.matrix()):
        groups.setdefault(tuple(rule.bucket_of(shape.sizes).items()), []).append((index, shape))
    return [
        ShapeGroup(dict(key), tuple(s for _, s in members), tuple(i for i, _ in members))
        for key, members in groups.items()
    ]


def matrix_metric(desc: KernelDescription) -> str:
    """The metric a matrix search optimises (in the description's `mode`): the weighted
    geometric mean of the metric over the shapes. It ranks configurations as the geometric mean
    relative to any fixed per-shape reference (the baseline's, say) does: the reference's own
    mean is a constant factor."""
    return f"{desc.metric}_geomean"


def descent_shapes(desc: KernelDescription) -> dict[str, float]:
    """Each shape's result key (``time_ms@0`` …) and weight where every shape keeps its own
    best (``per_shape`` selection): what the engine's per-shape descent follows
    (`ciq_tune.engine.shape_descent`). Empty for other rules, whose choices span shapes."""
    if selection_rule(desc).mode != "per_shape":
        return {}
    return {f"{desc.metric}@{i}": shape.weight for i, shape in enumerate(desc.matrix())}


def relative(value: float, baseline: float, mode: str) -> float:
    """A metric relative to the baseline, lower is better: value/baseline for ``min``."""
    return value / baseline if mode == "min" else baseline / value


def geomean(values: Sequence[float], weights: Sequence[float]) -> float:
    """The weighted geometric mean of non-negative finite `values` (0 when one of them is 0).

    Raises:
        ValueError: a value is negative or not finite.
    """
    if any(not (math.isfinite(v) and v >= 0) for v in values):
        raise ValueError(f"per-shape values must be non-negative and finite, got {list(values)}")
    if any(v == 0 for v in values):
        return 0.0
    total = sum(weights)
    return math.exp(sum(w * math.log(v) for w, v in zip(weights, values, strict=True)) / total)


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
        # A minimised 0 is as good as it gets; a maximised 0 has no ratio to its baseline.
        valid = value >= 0 if mode == "min" else value > 0
        if not (math.isfinite(value) and math.isfinite(base) and valid and base > 0):
            raise ValueError(f"per-shape values must be positive and finite, got {value}/{base}")
        rel.append(relative(value, base, mode))
    return geomean(rel, weights), max(rel)


# -- one evaluation: a configuration at every shape --------------------------------------------
def compile_key(sizes: Mapping[str, Any], constexprs: Iterable[str]) -> tuple[tuple[str, Any], ...]:
    """The compile-time values of one launch: each constexpr size's value, and for every other
    integer the specialisation a JIT compiler such as Triton's makes of it (equal to 1, a
    multiple of 16, beyond 32 bits). Launches with equal keys share one compiled kernel."""
    wanted = set(constexprs)
    key: list[tuple[str, Any]] = []
    for name in sorted(sizes):
        value = sizes[name]
        if name in wanted:
            key.append((name, value))
        elif isinstance(value, int) and not isinstance(value, bool):
            key.append((name, (value == 1, value % 16 == 0, abs(value) >= 2**31)))
    return tuple(key)


def constexpr_names(fn: Any) -> set[str]:
    """The parameters of a Triton kernel annotated ``tl.constexpr``, from its signature (the
    same under the interpreter, whose function has no `params`)."""
    inner = getattr(fn, "fn", fn)
    names = set()
    for name, param in inspect.signature(inner).parameters.items():
        if "constexpr" in str(param.annotation):
            names.add(name)
    return names


def first_of_each_key(
    desc: KernelDescription, key: Callable[[KernelDescription], Any]
) -> list[KernelDescription]:
    """The description at the first shape of each distinct compile key of its matrix: the
    kernels a configuration needs compiled.

    Raises:
        Exception: from `key` (a source that does not load, say).
    """
    firsts: dict[Any, KernelDescription] = {}
    for shape in desc.matrix():
        at = desc.at_shape(shape)
        firsts.setdefault(key(at), at)
    return list(firsts.values())


def evaluate_shapes(
    desc: KernelDescription,
    evaluate: Callable[[int, KernelDescription, bool], dict[str, Any]],
    key: Callable[[KernelDescription], Any],
) -> dict[str, Any]:
    """Evaluate one configuration at every shape of `desc`'s matrix, in one process.

    Args:
        desc: The description with its matrix.
        evaluate: ``evaluate(index, shape_desc, first)`` for the description at shape `index`
            of the matrix; `first` is True for the first shape of each compile key (compile,
            and report compile statistics), False when a kernel of the same key is compiled
            already. Its result is that shape's (``status`` and metrics).
        key: The compile key of the description at one shape (`compile_key`); an exception
            from it is that shape's ``compile_error``.

    Returns:
        `matrix_result` of the per-shape results, with ``compiles``: the shapes evaluated with
        `first` True, and ``restart`` (retire the worker) when a shape raised.
    """
    seen: set[Any] = set()
    results = []
    crashed = False
    for index, shape in enumerate(desc.matrix()):
        at = desc.at_shape(shape)
        try:
            shape_key = key(at)
        except Exception as exc:
            results.append({"status": "compile_error", "error": f"{type(exc).__name__}: {exc}"})
            continue
        first = shape_key not in seen
        seen.add(shape_key)
        try:
            results.append(evaluate(index, at, first))
        except Exception as exc:
            # An error while running (an illegal address, say): this shape crashed, and the
            # worker retires after the request, its CUDA context being suspect; the other shapes
            # still run (on a broken context they fail with its error, as data).
            crashed = True
            results.append({"status": "crash", "error": f"{type(exc).__name__}: {exc}"[:2000]})
    out = {**matrix_result(desc, results), "compiles": len(seen)}
    if crashed:
        out["restart"] = True
    return out


def matrix_result(desc: KernelDescription, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One flat result of a configuration over the matrix, from its per-shape results.

    Per shape ``i``: ``<metric>@i`` (NaN where it failed), ``status@i``, on failure
    ``error@i``, and ``cut@i`` (True) where a cut-off ended its round after one launch
    (`objectives.protocol.CUT_TIMER`). Overall: ``status`` ``ok`` when every shape succeeded
    (else the first failed shape's status, ``error`` saying which), ``<metric>_geomean`` over
    the shapes (NaN unless all succeeded), ``shapes_ok``, ``shapes_cut`` and the sums of each
    shape's ``compile_s`` and ``gpu_s``.
    """
    metric = desc.metric
    out: dict[str, Any] = {"status": "ok"}
    values = []
    failed = []
    for index, result in enumerate(results):
        status = str(result.get("status", "crash"))
        value = finite_number(result.get(metric))
        ok = status == "ok" and value is not None
        out[f"status@{index}"] = status if ok or status != "ok" else "crash"
        out[f"{metric}@{index}"] = value if value is not None and ok else math.nan
        if result.get("timer") == CUT_TIMER:
            out[f"cut@{index}"] = True
        if value is not None and ok:
            values.append(value)
        else:
            out[f"error@{index}"] = str(result.get("error", f"no finite {metric}"))[:2000]
            failed.append(index)
    weights = [s.weight for s in desc.matrix()]
    out[matrix_metric(desc)] = geomean(values, weights) if not failed else math.nan
    out["shapes_ok"] = len(values)
    out["shapes_cut"] = sum(1 for r in results if r.get("timer") == CUT_TIMER)
    for key in ("compile_s", "gpu_s"):  # the evaluation's totals over its shapes
        seconds = [r[key] for r in results if isinstance(r.get(key), int | float)]
        if seconds:
            out[key] = sum(seconds)
    if failed:
        first = failed[0]
        out["status"] = out[f"status@{first}"]
        out["error"] = f"{len(failed)} of {len(results)} shapes failed; shape {first}: " + str(
            out[f"error@{first}"]
        )
    return out


def make_matrix_trainable(
    desc: KernelDescription,
    *,
    make_trainable: Callable[[KernelDescription], Callable[[dict[str, Any]], dict[str, Any]]],
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The trainable of a matrix: a configuration evaluated at every shape (`matrix_result`).

    A kind of `NATIVE_MATRIX_KINDS` gets the whole description, and its worker runs the matrix
    in one request (`evaluate_shapes`); the others call the kind's trainable once per shape.

    Args:
        desc: The description with its matrix.
        make_trainable: ``objectives.make_trainable`` (with the benchmark server bound),
            injected to keep imports down.
    """
    if desc.kind in NATIVE_MATRIX_KINDS or not desc.shapes:
        return make_trainable(desc)
    per_shape = [make_trainable(desc.at_shape(s)) for s in desc.matrix()]
    return functools.partial(_each_shape, desc, per_shape)


def _each_shape(
    desc: KernelDescription,
    per_shape: Sequence[Callable[[dict[str, Any]], dict[str, Any]]],
    config: dict[str, Any],
) -> dict[str, Any]:
    return matrix_result(desc, [trainable(config) for trainable in per_shape])


def shape_values(result: Mapping[str, Any], metric: str, n: int) -> list[float | None]:
    """Per-shape metric values of a matrix result (None where a shape failed or did not run)."""
    return [finite_number(result.get(f"{metric}@{i}")) for i in range(n)]


def bucket_score(
    desc: KernelDescription,
    group: ShapeGroup,
    values: Sequence[float | None],
    baseline: Sequence[float | None],
) -> float | None:
    """A configuration's score on a bucket, lower is better: the weighted geometric mean over
    the bucket's shapes of its metric relative to the baseline's. None when it failed at one of
    them, or when one is past the rule's ``worst_shape_limit`` (modes ``one`` and ``per_key``).
    Where the baseline itself failed at one of the bucket's shapes, the reference is 1 (the
    plain geometric mean) and there is no guard.

    Args:
        desc: The description.
        group: The bucket.
        values: The configuration's per-shape values over the whole matrix (`shape_values`).
        baseline: The baseline configuration's per-shape values.
    """
    mine = [values[i] for i in group.indices]
    if any(v is None for v in mine):
        return None
    base = [baseline[i] for i in group.indices]
    limit = math.inf
    if desc.selection is not None and desc.selection.mode != "per_shape":
        limit = desc.selection.worst_shape_limit
    if any(b is None or b <= 0 for b in base):
        # No ratio to the baseline: the plain geometric mean, for every candidate alike.
        base, limit = [1.0] * len(mine), math.inf
    if desc.mode == "max" and any(v == 0 for v in mine):
        return None  # infinitely worse than the baseline
    score, worst = combine(
        [float(v) for v in mine if v is not None],
        [float(b) for b in base if b is not None],
        [s.weight for s in group.shapes],
        mode=desc.mode,
    )
    return None if worst > limit else score
