"""Per-shape coordinate descent for a search over a matrix of shapes.

A matrix search tells the engine one value per configuration, the weighted geometric mean over
the shapes, and keeps per shape the best configuration evaluated there: with `per_shape`
selection each shape's winner is its own. The engine's model follows the mean, which no shape's
optimum need be near (a GEMM at M = 1 and at M = 16384 want different tiles). This descent
follows each shape: once `after` evaluations are in, some of the proposals are moves from one
shape's best configuration that were never proposed. How many follows what they find: the
chance of a move is the moves' mean gain per evaluation over the sum of theirs and the engine's
proposals' (a gain: the weighted mean over the shapes of |log(new best / old best)|, from the
evaluations since `after`; each mean starts from the pooled mean as one pseudo-evaluation),
between `1 - share` and `share`. Where the shapes share an optimum, the engine's model finds it
and the moves find little; where they do not, the moves find most. Gains, not counts of new
bests: a descent in a poor basin finds many small ones, an escape from it one large one.

The shape whose turn it is has had the fewest moves per unit of weight (stride scheduling,
Waldspurger & Weihl, MIT/LCS/TM-528, 1995): a shape of weight 8 gets eight moves for one of a
shape of weight 1, as it counts eight times in the score. A move changes one parameter to an
adjacent value (`Parameter.neighbors`); a shape whose best has no such move left yields its
turn, and once no shape has one, moves change two parameters at once (where a constraint
couples two parameters, a local optimum of single moves is left by a pair). Of a turn's moves,
the one a ridge regression of the shape's value ranks on the parameters' values (one-hot, and
each ordered parameter's position: an additive model with a trend, Hoerl & Kennard,
Technometrics 1970) ranks best is proposed. Every evaluation
is timed at every shape, so a move made for one shape counts at every other it happens to suit.

The per-shape values are read from each record's `info` under `keys` (the matrix result's
``time_ms@0`` …), better as `mode` says; a missing or non-finite value is a shape where the
configuration failed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Literal

import numpy as np
from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field
from pydantic import model_validator

from ciq_tune.results import EvaluationRecord
from ciq_tune.results import finite_number
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes

# Defaults of `ShapeDescent`, cited in docs/benchmarks.md with the replay behind them.
SHAPE_DESCENT_DEFAULTS: dict[str, Any] = {"after": 20, "share": 0.75}
# Ridge penalty of the move-ranking model (its features are 0/1 indicators).
RIDGE_ALPHA = 1.0


class ShapeDescent(BaseModel):
    """The per-shape descent's settings and its one piece of state (`turns`).

    Args:
        keys: The `info` key of each shape's value.
        weights: Each shape's weight (positive), in the order of `keys`.
        mode: "min" when a lower value is better, else "max".
        after: Evaluations (told) before the first move.
        share: The largest chance that a proposal after that is a move (else the engine's
            own); the smallest is `1 - share`.
        turns: Moves made so far for each shape.
    """

    model_config = ConfigDict(extra="forbid")

    keys: list[str] = Field(min_length=1)
    weights: list[float]
    mode: Literal["min", "max"] = "min"
    after: int = Field(default=SHAPE_DESCENT_DEFAULTS["after"], ge=0)
    share: float = Field(default=SHAPE_DESCENT_DEFAULTS["share"], ge=0.5, le=1.0)
    turns: list[int] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_weight_per_shape(self) -> ShapeDescent:
        if len(self.weights) != len(self.keys) or any(w <= 0 for w in self.weights):
            raise ValueError("`weights` must hold one positive weight per key")
        if not self.turns:
            self.turns = [0] * len(self.keys)
        if len(self.turns) != len(self.keys):
            raise ValueError("`turns` must hold one count per key")
        return self

    def move_share(self, records: Sequence[EvaluationRecord]) -> float:
        """The chance that the next proposal is a move (see the module docstring)."""
        best: list[float | None] = [None] * len(self.keys)
        gains = {True: 0.0, False: 0.0}  # by "is a move"
        tries = {True: 0, False: 0}
        total = sum(self.weights)
        for i, record in enumerate(records):
            gain = 0.0
            for shape, key in enumerate(self.keys):
                value, before = finite_number(record.info.get(key)), best[shape]
                if value is None or (before is not None and not self._better(value, before)):
                    continue
                if before is not None:
                    gain += self.weights[shape] / total * _log_ratio(value, before)
                best[shape] = value
            if i >= self.after:
                gains[record.origin == "descent"] += gain
                tries[record.origin == "descent"] += 1
        told = tries[True] + tries[False]
        prior = (gains[True] + gains[False]) / told if told else 0.0
        if prior == 0.0:  # no evidence yet: even; nothing found since `after`: explore
            return 0.5 if told == 0 else 1.0 - self.share
        moves = (gains[True] + prior) / (tries[True] + 1)
        engine = (gains[False] + prior) / (tries[False] + 1)
        return min(max(moves / (moves + engine), 1.0 - self.share), self.share)

    def _better(self, value: float, than: float) -> bool:
        return value < than if self.mode == "min" else value > than

    def propose(
        self,
        space: SearchSpace,
        records: Sequence[EvaluationRecord],
        new: Callable[[list[Genes]], list[Genes]],
        rng: np.random.Generator,
    ) -> Genes | None:
        """The genes of the next move, or None (too early, the engine's turn, or no shape's
        best has a move left). `new` keeps the feasible rows never proposed."""
        if len(records) < self.after or rng.random() >= self.move_share(records):
            return None
        sign = 1.0 if self.mode == "min" else -1.0
        # Per shape in turn order, (value, genes) of each configuration with a value there,
        # signed so that lower is better.
        seen: dict[int, list[tuple[float, Genes]]] = {}
        for shape in sorted(range(len(self.keys)), key=lambda s: self.turns[s] / self.weights[s]):
            key = self.keys[shape]
            values = [
                (sign * v, r.genes)
                for r in records
                if (v := finite_number(r.info.get(key))) is not None
            ]
            if values:
                seen[shape] = values
        for moves_of in (neighbours, pair_moves):
            for shape, values in seen.items():
                moves = new(moves_of(space, min(values, key=lambda pair: pair[0])[1]))
                if moves:
                    self.turns[shape] += 1
                    return _most_promising(space, values, moves)
        return None


def neighbours(space: SearchSpace, genes: Genes) -> list[Genes]:
    """Every configuration that differs from `genes` in one parameter, moved to an adjacent
    value (any other value of an unordered one)."""
    out = []
    for j, param in enumerate(space.params):
        for gene in param.neighbors(genes[j]):
            out.append((*genes[:j], gene, *genes[j + 1 :]))
    return out


def pair_moves(space: SearchSpace, genes: Genes) -> list[Genes]:
    """Every configuration that differs from `genes` in two parameters, each moved as
    `neighbours` moves one."""
    out = []
    for j, k in itertools.combinations(range(len(space.params)), 2):
        for a in space.params[j].neighbors(genes[j]):
            for b in space.params[k].neighbors(genes[k]):
                row = list(genes)
                row[j], row[k] = a, b
                out.append(tuple(row))
    return out


def _most_promising(
    space: SearchSpace, values: Sequence[tuple[float, Genes]], moves: Sequence[Genes]
) -> Genes:
    """The move the ridge regression of the value ranks on `_features` ranks best."""
    X = np.array([_features(space, genes) for _, genes in values])
    ranks = np.argsort(np.argsort([value for value, _ in values])) / len(values)
    y = ranks - ranks.mean()
    coef = np.linalg.solve(X.T @ X + RIDGE_ALPHA * np.eye(X.shape[1]), X.T @ y)
    predicted = np.array([_features(space, genes) for genes in moves]) @ coef
    return moves[int(np.argmin(predicted))]


def _features(space: SearchSpace, genes: Genes) -> list[float]:
    """One indicator per value of each listed parameter (and one for knocked out), and the
    unit position of each ordered one (its trend reaches values no evaluation has yet)."""
    out: list[float] = []
    for param, gene in zip(space.params, genes, strict=True):
        if param.is_ordered:
            out.append(param.to_unit(gene))
        listed = getattr(param, "values", None)
        if listed is not None:
            row = [0.0] * (len(listed) + 1)
            row[len(listed) if gene is None else int(gene)] = 1.0
            out += row
    return out


def _log_ratio(new: float, old: float) -> float:
    """How much better `new` is than `old`, as |log(new / old)|; 1.0 (a full step) where a
    value is not positive."""
    return abs(math.log(new / old)) if new > 0 and old > 0 else 1.0
