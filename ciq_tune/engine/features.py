"""Configurations as rows of unit coordinates: the input of the screening models."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes


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
