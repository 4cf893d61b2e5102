"""Configurations as rows of unit coordinates: the input of the screening models."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ciq_tune.space import SearchSpace
from ciq_tune.space.primitives import DiscreteParameter
from ciq_tune.space.space import Genes

# An unordered parameter's one-hot column value: two distinct values are sqrt(2) x this apart.
UNORDERED_OFFSET = math.sqrt(0.5)


class UnitFeatures:
    """Each configuration as one row of parameter positions in [0, 1] (`Parameter.to_unit`),
    NaN where a parameter is absent (knocked out or inactive). Rows with a key are computed
    once and cached (evaluated configurations are featurised again every generation)."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, genes: Sequence[Genes], keys: Sequence[str] | None = None) -> np.ndarray:
        rows = []
        for i, g in enumerate(genes):
            key = keys[i] if keys is not None else None
            row = self._cache.get(key) if key is not None else None
            if row is None:
                present = self.space.flat(g)
                row = np.array(
                    [
                        leaf.param.to_unit(x) if leaf.key in present else math.nan
                        for leaf, x in zip(self.space.leaves, g, strict=True)
                    ]
                )
                if key is not None:
                    self._cache[key] = row
            rows.append(row)
        return np.array(rows, dtype=float).reshape(len(rows), len(self.space.leaves))


def process_coordinates(space: SearchSpace, unit: np.ndarray) -> np.ndarray:
    """Rows of `UnitFeatures` as the Gaussian process's coordinates: absent parameters at -1,
    each unordered parameter's column replaced by one column per value, `UNORDERED_OFFSET` at
    its own (any two of its values are one unit apart, as no order places one nearer)."""
    unit = np.nan_to_num(unit, nan=-1)
    columns = []
    for j, leaf in enumerate(space.leaves):
        param = leaf.param
        if param.is_ordered or not isinstance(param, DiscreteParameter):
            columns.append(unit[:, j : j + 1])
            continue
        n = len(param.values)
        index = np.rint(np.where(unit[:, j] >= 0, unit[:, j], np.nan) * (n - 1))
        columns.append((index[:, None] == np.arange(n)[None, :]) * UNORDERED_OFFSET)
    return np.hstack(columns) if columns else unit
