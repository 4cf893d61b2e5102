"""The benchmark matrix of a controls file (schema version 2): the tuned shapes, one entry per
configuration, and the rule that picks an entry for the sizes of a launch."""

from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

SelectionMode = Literal["one", "per_shape", "per_key"]
Bucket = Literal["exact", "pow2"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SelectionRule(_Strict):
    """How a launch's sizes pick an entry (see `select`).

    Attributes:
        mode: ``one`` (a single entry for every shape), ``per_shape`` (the entry tuned at
            exactly these sizes) or ``per_key`` (the entry of the bucket of the `key` sizes).
        key: The sizes that pick the entry (``per_shape``: every size; ``one``: none).
        bucket: ``exact`` compares key values as they are; ``pow2`` rounds each up to the next
            power of two first (``M=100`` and ``M=128`` share a bucket).
        fallback: ``nearest``: sizes no entry covers take the entry whose key values are
            closest in log2 space (a ratio of 2 is distance 1 per size).
        worst_shape_limit: ``one`` only: the largest per-shape metric relative to the baseline
            that the tuned configuration was allowed (a guard on the worst shape).
    """

    mode: SelectionMode
    key: list[str] = Field(default_factory=list)
    bucket: Bucket = "exact"
    fallback: Literal["nearest"] = "nearest"
    worst_shape_limit: float | None = None

    def bucket_of(self, sizes: Mapping[str, int]) -> dict[str, int]:
        """The entry key of `sizes`: its `key` sizes, rounded up to powers of two for ``pow2``.

        Raises:
            KeyError: `sizes` lacks a `key` size (the message names it).
        """
        missing = [k for k in self.key if k not in sizes]
        if missing:
            raise KeyError(f"sizes {dict(sizes)} lack {missing}, which select the configuration")
        if self.bucket == "exact":
            return {k: int(sizes[k]) for k in self.key}
        return {k: _next_pow2(int(sizes[k])) for k in self.key}


class ShapeResult(_Strict):
    """One tuned shape: its sizes and weight, the baseline's and the chosen configuration's
    metric as the search measured them, and the re-measurement (when there was one)."""

    sizes: dict[str, int]
    weight: float = 1.0
    baseline: float | None = None
    best: float | None = None
    remeasured: dict[str, Any] | None = None


class MatrixEntry(_Strict):
    """One configuration and the shapes it was tuned for (its bucket's shapes)."""

    key: dict[str, int]
    params: dict[str, Any] = Field(default_factory=dict)
    controls: dict[str, dict[str, Any]] = Field(default_factory=dict)
    rendered: dict[str, list[str] | dict[str, Any]] = Field(default_factory=dict)
    # Helion kernels: the resolved ``helion.Config`` fields of `params`.
    helion_config: dict[str, Any] | None = None
    shapes: list[ShapeResult]
    evaluations: int = 0
    validation: dict[str, Any] | None = None


class Matrix(_Strict):
    """The matrix section of a controls file."""

    selection: SelectionRule
    metric: str
    entries: list[MatrixEntry] = Field(min_length=1)

    def tuned_shapes(self) -> list[dict[str, int]]:
        """Sizes of every tuned shape, in entry order."""
        return [shape.sizes for entry in self.entries for shape in entry.shapes]


def log_distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """Euclidean distance of two size mappings in log2 space over their common names."""
    names = [k for k in a if k in b]
    return math.sqrt(sum((math.log2(max(a[k], 1)) - math.log2(max(b[k], 1))) ** 2 for k in names))


def select(matrix: Matrix, sizes: Mapping[str, int]) -> tuple[MatrixEntry, bool]:
    """The entry for a launch's `sizes` under the matrix's rule.

    Returns:
        ``(entry, exact)``: `exact` is False when no entry covers `sizes` and the nearest one
        was taken (``per_shape``: no shape tuned at these sizes; ``per_key``: no bucket).
    """
    rule = matrix.selection
    if rule.mode == "one":
        return matrix.entries[0], True
    wanted = rule.bucket_of(sizes)
    for entry in matrix.entries:
        if entry.key == wanted:
            return entry, True
    nearest = min(matrix.entries, key=lambda e: log_distance(wanted, e.key))
    return nearest, False


def untuned(matrix: Matrix, shapes: Sequence[Mapping[str, int]]) -> list[dict[str, int]]:
    """The shapes of `shapes` at which nothing was tuned or measured: at launch they take the
    entry of their bucket (``per_key``), the nearest entry, or the one configuration."""
    tuned = matrix.tuned_shapes()

    def covered(sizes: Mapping[str, int]) -> bool:
        return any(all(sizes.get(k) == v for k, v in t.items()) for t in tuned)

    return [dict(s) for s in shapes if not covered(s)]


def _next_pow2(value: int) -> int:
    return 1 if value <= 1 else 1 << (value - 1).bit_length()
