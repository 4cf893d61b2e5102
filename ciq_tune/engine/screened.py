"""Screened search, the default for one objective: many cheap proposals, a model picks the few
that are evaluated (the measurements behind the defaults: docs/benchmarks.md, "Synthetic battery").

Ranking. Where the feasible configurations can be listed (`ranking` "auto": short lists only,
at most `MAX_LISTED`, not started from an earlier search's best), the screened part of a
generation is the never-proposed listed configurations of highest expected improvement under a
Gaussian process (`engine/gaussian_process.py`: per-parameter length scales under a prior,
fitted noise), the whole listed space ranked as in Kernel Tuner (Willemsen et al., PMBS 2021),
each pick believed at its predicted value before the next; the last `local_picks` change at
most `LOCAL_CHANGES` parameters of the best, whose neighbours differ by a few per cent.
Elsewhere a generation draws `screen_factor` x `pool_size` feasible, never-proposed candidates
(pattern moves around the elite, crossover children, uniform draws) and keeps those of highest
ratio l(x)/g(x) of Parzen densities (`engine/parzen.py`) over the good evaluations (the best
`gamma` share, at most `max_good`) and all others, failures included (tree-structured Parzen
estimator, Bergstra et al., NeurIPS 2011, eqs. 2-4; the ratio as a classifier of "good or not"
over pattern moves follows Helion's `LFBOTreeSearch`, after Song et al., ICML 2022, "A general
recipe for likelihood-free Bayesian optimization"). With a wide parameter (more than
`genetic.WIDE_VALUES` values, or continuous), the first `process_picks_until` evaluations pick
the drawn candidates by expected improvement times the chance to succeed instead (the GA
family's pre-selection, `engine/genetic.py`): a few evaluations make the ratio's "good" density
peak right beside them, while the process interpolates and extrapolates their slopes.

First designs: a listed space starts from `listed_initial_points` configurations, each the one
farthest from those before it (greedy maximin); a space with a wide parameter from
`wide_initial_points` scrambled Sobol' points, infeasible rows replaced by maximin draws.

After `explore_after` generations without a new best, a binomial `explore_share` of each
generation is unscreened, since the model only passes candidates near the basin it believes in.
With a wide parameter, a generation also holds compass polls around the best (`polish_share`,
unscreened, `engine/coordinate_search.py`), whose per-parameter steps resolve what the model's
wide kernels cannot; the exploring share is `wide_explore_share`, each point the farthest of
`MAXIMIN_DRAWS` uniform draws from everything proposed (maximin), and `converged_explore_share`
once the poll is used up, when explored points also seed MLSL-style descents
(`engine/multistart.py`, multi-level single linkage: a coarse compass search from a point lower
than everything within the critical distance, which takes over the polish once it beats the
best). Settling: once the polish only creeps (no gain of `settle_progress` of the values'
spread for `settle_after` evaluations), the part of a generation that is not polishing restarts
(descends or explores) instead of being screened. The polish, the descents and the fitted
length scales and noise are kept in the engine's state (`_strategy_state`), so a resumed search
goes on where it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any
from typing import ClassVar

import numpy as np
from pymoo.core.population import Population

from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.coordinate_search import CompassSearch
from ciq_tune.engine.gaussian_process import NOISE
from ciq_tune.engine.genetic import value_spread
from ciq_tune.engine.multistart import Samples
from ciq_tune.engine.multistart import critical_distance
from ciq_tune.engine.operators.mutation.pattern_move import PatternMove
from ciq_tune.engine.operators.sampling.sobol import SobolSampling
from ciq_tune.engine.parzen import ParzenEstimator
from ciq_tune.engine.process_ranking import ProcessRankedGA
from ciq_tune.engine.proposals import Candidate
from ciq_tune.engine.screened_config import ScreenedGAConfig
from ciq_tune.space.space import Genes


class ScreenedGA(ProcessRankedGA):
    """Offspring screened by a density-ratio model (see the module docstring)."""

    name: ClassVar[str] = "screened"
    config_model: ClassVar[type[EngineConfig]] = ScreenedGAConfig

    def _model(self) -> ParzenEstimator:
        if getattr(self, "_parzen", None) is None:
            config: ScreenedGAConfig = self.config  # type: ignore[assignment]
            self._parzen = ParzenEstimator(
                self.space, bandwidth=config.bandwidth, multivariate=config.multivariate
            )
            self._pattern = PatternMove()
        return self._parzen

    def _strategy_state(self) -> dict[str, Any]:
        # The restarts' "descent" and "descended" sit beside the compass, at the top level.
        scales = getattr(self, "_scales", None)
        return {
            "compass": self._compass_search().state(),
            **self._multistart().state(),
            "fitted_length_scales": None if scales is None else [float(v) for v in scales],
            "fitted_length_scales_at": getattr(self, "_scales_at", 0),
            "fitted_noise": getattr(self, "_noise", None),
        }

    def _load_strategy_state(self, state: Mapping[str, Any]) -> None:
        if state.get("compass"):
            self._compass_search().load_state(state["compass"])
        self._multistart().load_state(state)
        # The scales and noise in use (not the `length_scales` setting) and how many
        # evaluations they fit.
        scales = state.get("fitted_length_scales")
        self._scales = None if scales is None else np.array(scales)
        self._scales_at = int(state.get("fitted_length_scales_at", 0))
        self._noise = state.get("fitted_noise") or NOISE  # a state without one: the fixed one

    def _first_generation(self) -> list[Candidate]:
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        # A budget in generations promises `pool_size` evaluations per generation.
        by_generations = self.budget.max_generations is not None
        if self._ranks_by_process():
            size = config.pool_size if by_generations else config.listed_initial_points
            return self._listed_design(size)
        if config.wide_initial_points <= config.pool_size or by_generations or not self._wide():
            return super()._first_generation()
        size = config.wide_initial_points
        # Rows of the design that break the constraints are dropped and refilled below.
        first = self._first_design(size, SobolSampling(drop_infeasible=True))
        return first + self._maximin_candidates(size - len(first), self._unit_features(), first)

    def _listed_design(self, size: int) -> list[Candidate]:
        """The warm-start points, then listed configurations up to `size`, each the farthest
        from every one before it in the process's coordinates (ties broken at random). Exact
        over the listed space, not `_maximin_candidates`' best of a few uniform draws.
        Seed ranges (`Range(seed_low=…, seed_high=…)`) are a prior: the design takes its rows
        from the configurations inside them while any is left, then from the rest."""
        first = self._first_design(0, self.first_sampling)  # the warm-start points only
        X = self._listed_X
        gap = np.full(len(X), np.inf)
        for candidate in first:
            i = self._listed_index.get(tuple(candidate.genes))
            if i is not None:
                gap = np.minimum(gap, np.linalg.norm(X - X[i], axis=1))
        space = self.space
        seeded = (
            np.array([space.in_seed_ranges(tuple(g)) for g in self._listed])
            if space.has_seed_ranges
            else None
        )
        while len(first) < size:
            order = self.rng.permutation(len(X))
            if seeded is not None and (gap[seeded] > 0).any():
                order = order[seeded[order]]
            pick = int(order[int(np.argmax(gap[order]))])
            if gap[pick] == 0.0:  # every listed configuration is in the design
                self.loop.exhausted = True
                break
            gap = np.minimum(gap, np.linalg.norm(X - X[pick], axis=1))
            picked = self._make_candidate(self._listed[pick], "random")
            if picked is not None:
                first.append(picked)
        return first

    def _offspring(self, n: int) -> list[Candidate]:
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        explore = 0
        wide = self._wide()
        self._promote_descent()
        out: list[Candidate] = []
        rate: float | None = None
        if self.loop.stagnant >= config.explore_after:
            rate = config.wide_explore_share if wide else config.explore_share
        converged = wide and self._converged()
        if converged:
            rate = max(rate or 0.0, config.converged_explore_share)
            out = self._descend(round(config.restart_share * n))
        if rate is not None:
            # Binomial, so a steady-state request for one candidate explores at the same rate.
            explore = int(self.rng.binomial(n - len(out), rate))
        share = config.polish_share * (n - len(out) - explore) if wide else 0.0
        n_polish = int(share) + int(self.rng.random() < share - int(share))
        # Polishing moves are not screened: near the optimum the model's kernels are wider than
        # the moves, and the compass search's steps, not the model, resolve the last values.
        out += self._polished(n_polish)
        n_screened = n - explore - len(out)
        if wide and not converged and self._settled():
            # The polish goes on, the rest of the generation restarts (the maximin below).
            out += self._descend(round(config.restart_share * n_screened))
            n_screened = 0
        pool_size = n_screened * config.screen_factor
        if self._ranks_by_process():
            out += self._expected_improvement_picks(n_screened)
        elif wide and len(self._records) < config.process_picks_until:
            out += self._process_picks(self._draw(pool_size), n_screened)
        else:
            out += self._screened(self._draw(pool_size), n_screened)
        sampling = config.explore_sampling
        if sampling == "maximin" or (sampling == "auto" and wide):
            out += self._maximin_candidates(n - len(out), self._unit_features())
        return out + self._random_candidates(n - len(out))

    def _screened(self, pool: list[Genes], n: int) -> list[Candidate]:
        """The `n` candidates of `pool` with the highest density ratio."""
        if not pool or n == 0:
            return []
        scores = self._density_ratio(pool)
        out: list[Candidate] = []
        for index in np.argsort(-scores, kind="stable"):
            candidate = self._make_candidate(pool[int(index)], "offspring")
            if candidate is not None:
                out.append(candidate)
            if len(out) == n:
                break
        return out

    def _converged(self) -> bool:
        """Whether the compass search has used up the poll around the best configuration."""
        good, _ = self._split()
        return bool(good) and self._compass_search().converged_at(good[0].genes)

    def _settled(self) -> bool:
        """Whether the last `settle_after` evaluations improved the best by less than
        `settle_progress` of the spread of the values (median - best)."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        if config.restart_share == 0 or len(self._records) < config.settle_after:
            return False
        ok = [(i, self._value(r)) for i, r in enumerate(self._records) if r.ok]
        if not ok:
            return False
        values = np.array([v for _, v in ok])
        tolerance = config.settle_progress * float(value_spread(values))
        best, last = math.inf, 0
        for i, v in ok:
            if v < best - tolerance:
                last = i
            best = min(best, v)
        return len(self._records) - last > config.settle_after

    def _promote_descent(self) -> None:
        """A descent that found the best configuration so far becomes the polish (its steps
        already fit its basin)."""
        restarts = self._multistart()
        descent = restarts.descent
        if descent is None:
            return
        good, _ = self._split()
        if not good or good[0].candidate_id not in descent.ids:
            return
        # Its steps and centre, refined down to one value from now on.
        self._compass = CompassSearch(self.space)
        self._compass.load_state(descent.compass.state())
        restarts.descended |= set(descent.ids)
        restarts.descent = None

    def _descend(self, n: int) -> list[Candidate]:
        """Up to `n` poll points of the local descent under way, or of a new one from the
        lowest configuration that MLSL's rule lets start one (none when no configuration
        does); the polish's centre, the best, starts none."""
        if n <= 0:
            return []
        samples = self._samples()
        best = int(np.argmin(samples.values))
        eligible = [i != best for i in range(len(samples.ids))]
        make = partial(self._make_candidate, origin="offspring")
        return self._multistart().propose(
            samples, eligible, n, self.proposals.new_genes, make, self.rng
        )

    def _samples(self) -> Samples:
        """The successful evaluations, their unit coordinates (absent parameters at -1),
        values, and MLSL's critical distance for them."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        ok = [r for r in self._records if r.ok]
        features = self._unit_features()
        X = np.nan_to_num(features([r.genes for r in ok], [r.key for r in ok]), nan=-1)
        return Samples(
            ids=[r.candidate_id for r in ok],
            genes=[r.genes for r in ok],
            X=X,
            values=np.array([self._value(r) for r in ok]),
            radius=critical_distance(len(ok), X.shape[1], config.restart_sigma),
        )

    def _polish(self, n: int) -> list[Genes]:
        """About `n` new compass-search poll points around the best (with several objectives,
        the lowest sum of them, as `_split` ranks)."""
        good, _ = self._split()
        if not good or n == 0:
            return []
        return self._compass_search().poll(
            good[0].genes, n, self.proposals.new_genes, self.rng, self._polish_values()
        )

    def _draw(self, n: int) -> list[Genes]:
        """About `n` distinct feasible genes never proposed, from the three sources."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        self._model()
        n_random = math.ceil(n * config.random_share)
        n_local = math.ceil(n * config.local_share)
        rows = [self.space.sample_genes(self.rng) for _ in range(n_random)]
        good, _ = self._split()
        if good:
            # Half of the moves start from the best configuration, half from the other elite.
            starts = np.where(
                self.rng.random(n_local) < 0.5, 0, self.rng.integers(len(good), size=n_local)
            )
            X = np.array([list(good[int(i)].genes) for i in starts], dtype=object)
            moved = self._pattern.do(self.problem, Population.new("X", X), random_state=self.rng)
            rows += [tuple(r) for r in moved.get("X")]
        if len(self._population) >= 2:
            n_cross = max(n - n_random - n_local, 0)
            children = self._children(math.ceil(n_cross / 2))
            rows += [tuple(r) for r in children.get("X")]
        return self.proposals.new_genes(rows)

    def _density_ratio(self, pool: list[Genes]) -> np.ndarray:
        """log l(x) - log g(x) of each candidate."""
        good, bad = self._split()
        if not good:
            return self.rng.random(len(pool))
        model = self._model()
        features = self._unit_features()
        X = features(pool)
        G = features([r.genes for r in good], [r.key for r in good])
        B = features([r.genes for r in bad], [r.key for r in bad])
        return model.log_density(X, G) - model.log_density(X, B)
