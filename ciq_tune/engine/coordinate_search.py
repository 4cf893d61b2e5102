"""Compass search around the best configuration, one step size per parameter.

The polishing half of the `screened` strategy on spaces with a wide parameter. It polls the
best configuration's coordinate neighbours: each ordered parameter moved by + and - its own
step (a fraction of its (log-)range, at least one value), every other value of a category and
the knockout toggle. When the best moves (by a poll point or by any other proposal), each
ordered parameter it moved gets a step of twice that move, and the pattern move that repeats
the whole move twice as far is proposed first (Hooke & Jeeves, J. ACM 1961, accelerating); a
parameter whose two moves were both tried without a new best has its step halved (compass
search with per-coordinate expansion and contraction, Kolda, Lewis & Torczon, SIAM Review
2003, sec. 3), or, where both moves and the centre have values, cut to the distance of the
vertex of the parabola through the three (never more than half; Brent 1973, ch. 5), so that
the next move towards it lands on it: on a wide range that curves like a parabola the poll
reaches the optimum in one contraction instead of one halving per bit (the battery's
`int_wide`, seeds 100-199: median regret at 50 evaluations 287 with halving only, 69 with the
parabola; docs/benchmarks.md, "Synthetic battery").

Once every poll point at the finest steps has been tried, the best is a local optimum of the
coordinate moves; the search then moves pairs of parameters together (the corners), and once
those are tried too it proposes nothing until the best changes and is `converged` (the
screened proposals and the exploration look elsewhere; the flag is part of its state).

With the values of the evaluations, each poll first proposes the minimum of a quadratic
fitted to the evaluations nearest the centre over its active continuous parameters (twice as
many as the quadratic has coefficients, among those whose other parameters decode as the
centre's; too few of those, as after a move of a discrete parameter, and the nearest with any
other values are fitted, a constant for each combination of them), where it curves upwards,
no farther than those evaluations (a model step of derivative-free trust-region methods, Conn,
Scheinberg & Vicente 2009, ch. 10): halving steps alone resolve a continuous value one bit per
two evaluations; a model step near a smooth minimum resolves all of them at once. A model step
evaluated without moving the centre halves the trust radius for the next (from its own length),
until the centre moves. Where the model's minimum is the centre itself, to within the finest
steps, its parameters are resolved and their coordinate moves are not polled: the poll turns to
the other parameters and, once those are used up, converges, instead of halving each continuous
step some 13 times, two polls a halving, down to its finest (the battery's `continuous_basins`,
seeds 100-199: the global optimum within 200 evaluations in 91 of 100 seeds, 21 with those
moves polled, the exploration starting sooner; docs/benchmarks.md, "Synthetic battery").

Proposals are checked against everything proposed before (`is_new`), so the search never
repeats an evaluation and, in a steady-state engine, does not poll a point that is still out.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np

from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes

# First step of each ordered parameter, and its largest, as a fraction of the (log-)range.
INITIAL_STEP = 0.125
MAX_STEP = 0.5
# Finest step of a continuous parameter, as a fraction of its (log-)range (the duplicate
# tolerance of continuous spaces is 1e-6 of the range: finer steps could not be told apart).
MIN_CONTINUOUS_STEP = 1e-5
# Step halvings tried in one call before giving up on finding new poll points.
MAX_HALVINGS = 64
# Evaluations a quadratic model of the continuous parameters is fitted to, per coefficient.
MODEL_POINTS_PER_TERM = 2


class CompassSearch:
    """Per-parameter compass search around a moving centre (see the module docstring).

    Args:
        space: the search space.
        finest: the finest step of every ordered parameter, as a fraction of its (log-)range
            (at least one value; 0: down to one value): a coarse search that only has to
            tell whether its basin is worth polishing stops earlier.
    """

    def __init__(self, space: SearchSpace, finest: float = 0.0) -> None:
        self.space = space
        params = space.params
        self._ordered = [p.is_ordered and p.cardinality() > 1 for p in params]
        self._min_step = [
            max(
                finest,
                MIN_CONTINUOUS_STEP if p.is_continuous else 1.0 / max(p.cardinality() - 1, 1),
            )
            for p in params
        ]
        self.steps = [INITIAL_STEP] * len(params)
        self.center: Genes | None = None
        self._pattern: Genes | None = None
        # Whether every poll point around the centre has been proposed (a local optimum of the
        # coordinate and corner moves); cleared when the centre moves.
        self.converged = False
        # The last model step proposed from this centre, and the trust radius (unit
        # coordinates) that halves each time one is evaluated without moving the centre; both
        # cleared when the centre moves.
        self._model_step: Genes | None = None
        self._model_radius: float | None = None

    def poll(
        self,
        best: Genes,
        n: int,
        is_new: Callable[[list[Genes]], list[Genes]],
        rng: np.random.Generator,
        values: Mapping[Genes, float] | None = None,
    ) -> list[Genes]:
        """Up to `n` new poll points around `best` (fewer once the search has converged).

        Args:
            best: genes of the best configuration so far.
            n: how many points to propose.
            is_new: the feasible, never-proposed genes among its argument, in order.
            rng: the engine's generator (the order in which parameters are polled).
            values: the value (lower is better) of each evaluated configuration, for the
                quadratic-model step over continuous parameters; None: no model step.
        """
        if n <= 0:
            return []
        self._move_center(tuple(best))
        out: list[Genes] = []
        if self._pattern is not None:
            out += is_new([self._pattern])
            self._pattern = None
        resolved: set[int] = set()
        if values is not None:
            self._distrust_failed_model_step(values)
            model, resolved = self._model_points(values)
            model = [g for g in is_new(model) if g not in out]
            if model:
                self._model_step = model[0]
            out += model
        fresh: list[Genes] = []
        for _ in range(MAX_HALVINGS):
            points = self._points(skip=resolved)
            points = [points[i] for i in rng.permutation(len(points))]
            fresh = is_new([g for _, g in points])
            out += [g for g in fresh if g not in out]
            if len(out) >= n:
                break
            tried = {j for j, g in points} - {j for j, g in points if g in fresh}
            halved = False
            for j in tried:
                if self._ordered[j] and self.steps[j] > self._min_step[j] * (1 + 1e-9):
                    moves = [g for i, g in points if i == j]
                    self.steps[j] = max(self._contracted_step(j, moves, values), self._min_step[j])
                    halved = True
            if not halved:
                break
        if not fresh and len(out) < n:
            # The coordinate moves are used up: a coordinate-wise minimum of a tilted valley is
            # not always its minimum on a grid, so try moving two parameters at once.
            corners = self._corner_points(skip=resolved)
            corners = [corners[i] for i in rng.permutation(len(corners))]
            out += [g for g in is_new(corners) if g not in out]
        # Short with no coordinate move left: these are the last poll points around the centre.
        self.converged = not fresh and len(out) < n
        return out[:n]

    def converged_at(self, best: Genes) -> bool:
        """Whether the poll around `best` is used up (its last poll came back short, with no
        coordinate move left to try)."""
        return self.converged and self.center == tuple(best)

    def _move_center(self, best: Genes) -> None:
        """Follow a new best: widen the steps of the parameters it moved, and after a move
        along one parameter queue the pattern move that repeats it."""
        old = self.center
        self.center = best
        if old is None or old == best:
            return
        self.converged = False
        self._model_step, self._model_radius = None, None
        params = self.space.params
        moved = [j for j, (a, b) in enumerate(zip(old, best, strict=True)) if a != b]
        delta = {}
        for j in moved:
            if self._ordered[j] and old[j] is not None and best[j] is not None:
                delta[j] = params[j].to_unit(best[j]) - params[j].to_unit(old[j])
                self.steps[j] = min(MAX_STEP, max(2 * abs(delta[j]), self._min_step[j]))
        if delta:
            pattern = list(best)
            for j, d in delta.items():
                pattern[j] = params[j].shift(best[j], 2 * d)
            self._pattern = tuple(pattern)

    def _points(self, skip: set[int]) -> list[tuple[int, Genes]]:
        """(parameter, genes) of every coordinate move from the centre at the current steps,
        except along the parameters in `skip`."""
        assert self.center is not None
        center = self.center
        out: list[tuple[int, Genes]] = []
        for j, param in enumerate(self.space.params):
            if param.cardinality() <= 1 or j in skip:
                continue
            genes: list[Any] = []
            if self._ordered[j] and center[j] is not None:
                genes += [param.shift(center[j], s * self.steps[j]) for s in (1.0, -1.0)]
                if param.knockout_prob is not None:
                    genes.append(None)
            else:
                genes += param.neighbors(center[j])
            for gene in genes:
                if gene != center[j]:
                    out.append((j, (*center[:j], gene, *center[j + 1 :])))
        return out

    def _contracted_step(
        self, j: int, moves: list[Genes], values: Mapping[Genes, float] | None
    ) -> float:
        """The next step of parameter `j` after its moves `moves` from the centre were tried
        without a new best: half the step, or, where both moves and the centre have values,
        the distance to the vertex of the parabola through the three (at most half the step,
        the centre being the lowest of them; Brent 1973, ch. 5)."""
        half = self.steps[j] / 2
        center = self.center
        assert center is not None
        if values is None or center not in values:
            return half
        sides = [g for g in moves if g[j] is not None and g in values]  # + and -, not knocked out
        if len(sides) != 2:
            return half
        param = self.space.params[j]
        c = param.to_unit(center[j])
        (a, fa), (b, fb) = ((param.to_unit(g[j]) - c, values[g] - values[center]) for g in sides)
        # The vertex of the parabola through (a, fa), (0, 0), (b, fb), relative to the centre.
        curvature = fa * b - fb * a
        if curvature * (b - a) <= 0:
            return half
        vertex = 0.5 * (fa * b * b - fb * a * a) / curvature
        return min(abs(vertex), half)

    def _distrust_failed_model_step(self, values: Mapping[Genes, float]) -> None:
        """Once the last model step from this centre has been evaluated (and, the centre being
        unchanged, was no better), trust the next one only half as far as that step went."""
        if self._model_step is None or self._model_step not in values:
            return
        assert self.center is not None
        offset = self.space.to_unit(self._model_step) - self.space.to_unit(self.center)
        self._model_radius = 0.5 * float(np.linalg.norm(offset))
        self._model_step = None

    def _model_points(self, values: Mapping[Genes, float]) -> tuple[list[Genes], set[int]]:
        """The minimum of a quadratic fitted to the evaluations nearest the centre over its
        active continuous parameters (`_quadratic_minimum`), among those whose configuration
        is the centre's in every other parameter, cut back to the trust radius; none without
        continuous parameters. Where that minimum is the centre itself, to within the finest
        step along each of them, no point but those parameters: they are resolved, and their
        coordinate moves are not polled (the model, fitted again at every poll, stands for
        them).

        With too few such evaluations (after the centre moved along another parameter), the
        nearest ones with any other values are fitted, each combination of those values with
        a constant of its own (`_offset_rows`): where the continuous parameters add to the
        others, the quadratic's shape is shared and the step exact; where they interact, it is
        a guess that the trust radius corrects, so such a fit resolves nothing."""
        assert self.center is not None
        center, space = self.center, self.space
        active = space.flat(center)  # inactive and knocked-out parameters are left out
        free = [
            j
            for j, leaf in enumerate(space.leaves)
            if leaf.param.is_continuous and leaf.key in active
        ]
        if not free or center not in values:
            return [], set()
        fit = self._rows_to_fit(values, free, active)
        if fit is None:
            return [], set()
        X, y, groups, own_only = fit
        step = _quadratic_minimum(X, y, groups)
        if step is None:
            return [], set()
        if all(abs(offset) < self._min_step[j] for j, offset in zip(free, step, strict=True)):
            return [], set(free) if own_only else set()
        # No farther than the fitted points, nor than the trust radius.
        radius = float(np.linalg.norm(X, axis=1).max())
        if self._model_radius is not None:
            radius = min(radius, self._model_radius)
        length = float(np.linalg.norm(step))
        if length > radius:
            step = step * (radius / length)
        genes = list(center)
        for j, offset in zip(free, step, strict=True):
            genes[j] = space.params[j].shift(center[j], float(offset))
        return [tuple(genes)], set()

    def _rows_to_fit(
        self, values: Mapping[Genes, float], free: list[int], active: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray, list[Any], bool] | None:
        """The evaluations the model over the parameters `free` is fitted to: their offsets
        from the centre (unit coordinates), values and groups (the genes of their other
        parameters), and whether they all share the centre's other values (the centre's own
        rows, where there are enough of them; else the nearest of all, `_offset_rows`); None
        with too few. `active`: the centre's configuration."""
        assert self.center is not None
        center, space = self.center, self.space
        n_points = MODEL_POINTS_PER_TERM * (len(free) + 1) * (len(free) + 2) // 2
        free_keys = {space.leaves[j].key for j in free}

        def others(genes: Genes, flat: Mapping[str, Any]) -> tuple[tuple[int, Any], ...]:
            # The genes of the other parameters present (hashable, unlike some values).
            return tuple(
                (j, genes[j])
                for j, leaf in enumerate(space.leaves)
                if j not in free and leaf.key in flat
            )

        own = others(center, active)
        rows, groups = [], []
        for row, value in values.items():
            flat = space.flat(row)
            if free_keys <= flat.keys():
                rows.append((row, value))
                groups.append(others(row, flat))
        own_only = sum(g == own for g in groups) >= n_points
        if own_only:
            rows = [r for r, g in zip(rows, groups, strict=True) if g == own]
            groups = [own] * len(rows)
        if len(rows) - len(set(groups)) + 1 < n_points:  # too few even all together
            return None
        params = space.params
        origin = np.array([params[j].to_unit(center[j]) for j in free])
        X = np.array([[params[j].to_unit(g[j]) for j in free] for g, _ in rows]) - origin
        nearest = _offset_rows(np.argsort(np.linalg.norm(X, axis=1)), groups, n_points)
        if nearest is None:
            return None
        y = np.array([v for _, v in rows])
        return X[nearest], y[nearest], [groups[i] for i in nearest], own_only

    def _corner_points(self, skip: set[int]) -> list[Genes]:
        """Every pair of ordered parameters not in `skip` moved together by their steps (4 per
        pair)."""
        assert self.center is not None
        center, params = self.center, self.space.params
        present = [
            j for j, o in enumerate(self._ordered) if o and center[j] is not None and j not in skip
        ]
        out: list[Genes] = []
        for a, i in enumerate(present):
            for j in present[a + 1 :]:
                for si, sj in ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)):
                    genes = list(center)
                    genes[i] = params[i].shift(center[i], si * self.steps[i])
                    genes[j] = params[j].shift(center[j], sj * self.steps[j])
                    if genes[i] != center[i] and genes[j] != center[j]:
                        out.append(tuple(genes))
        return out

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "steps": list(self.steps),
            "center": None if self.center is None else list(self.center),
            "pattern": None if self._pattern is None else list(self._pattern),
            "converged": self.converged,
            "model_step": None if self._model_step is None else list(self._model_step),
            "model_radius": self._model_radius,
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.steps = [float(s) for s in state["steps"]]
        self.center = _genes(state["center"])
        self._pattern = _genes(state["pattern"])
        self.converged = bool(state.get("converged", False))
        self._model_step = _genes(state.get("model_step"))
        radius = state.get("model_radius")
        self._model_radius = None if radius is None else float(radius)


def _offset_rows(order: np.ndarray, groups: Sequence[Any], n_points: int) -> np.ndarray | None:
    """The shortest head of `order` (row indices, nearest first) holding `n_points` rows
    beyond the first of each group but one (each further group costs its own constant);
    None where all of them do not."""
    seen: set[Any] = set()
    for count, i in enumerate(order, start=1):
        seen.add(groups[i])
        if count - len(seen) + 1 >= n_points:
            return order[:count]
    return None


def _quadratic_minimum(X: np.ndarray, y: np.ndarray, groups: Sequence[Any]) -> np.ndarray | None:
    """Where the least-squares quadratic through the values `y` at offsets `X` (one row each,
    from the centre) is lowest, as an offset from the centre, with one constant per distinct
    value of `groups` (one per row) and the rest of its coefficients shared; None where it
    does not curve upwards in every direction (the model step of derivative-free trust-region
    methods, Conn, Scheinberg & Vicente 2009, ch. 10)."""
    dim = X.shape[1]
    pairs = [(a, b) for a in range(dim) for b in range(a, dim)]
    index = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    k = len(index)
    constants = np.eye(k)[[index[g] for g in groups]]
    design = np.column_stack([constants, X, *[X[:, a] * X[:, b] for a, b in pairs]])
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    gradient, hessian = coef[k : k + dim], np.zeros((dim, dim))
    for (a, b), c in zip(pairs, coef[k + dim :], strict=True):
        hessian[a, b] += c
        hessian[b, a] += c
    if not np.all(np.linalg.eigvalsh(hessian) > 0):
        return None
    return -np.linalg.solve(hessian, gradient)


def _genes(value: Sequence[Any] | None) -> Genes | None:
    return None if value is None else tuple(value)
