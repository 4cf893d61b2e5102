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

import bisect
import math
from collections.abc import Mapping
from functools import partial
from typing import Any
from typing import ClassVar
from typing import Literal

import numpy as np
from pydantic import Field
from pymoo.core.population import Population

from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.coordinate_search import CompassSearch
from ciq_tune.engine.ga import GA
from ciq_tune.engine.gaussian_process import NOISE
from ciq_tune.engine.gaussian_process import GaussianProcess
from ciq_tune.engine.gaussian_process import ListedProcess
from ciq_tune.engine.gaussian_process import expected_improvement
from ciq_tune.engine.gaussian_process import fitted_hyperparameters
from ciq_tune.engine.genetic import value_spread
from ciq_tune.engine.multistart import Samples
from ciq_tune.engine.multistart import critical_distance
from ciq_tune.engine.operators.mutation.pattern_move import PatternMove
from ciq_tune.engine.operators.sampling.sobol import SobolSampling
from ciq_tune.engine.parzen import ParzenEstimator
from ciq_tune.engine.proposals import Candidate
from ciq_tune.errors import EngineError
from ciq_tune.results import EvaluationRecord
from ciq_tune.space.space import MAX_ENUMERATION
from ciq_tune.space.space import Genes

SCREENED_DEFAULTS: dict[str, Any] = {
    "pool_size": 4,
    "gamma": 0.25,
    "max_good": 25,
    "screen_factor": 32,
    "random_share": 0.25,
    "local_share": 0.5,
    "bandwidth": 0.2,
    "multivariate": True,
    "polish_share": 0.5,
    "explore_after": 8,
    "explore_share": 0.25,
    "wide_explore_share": 0.5,
    "explore_sampling": "auto",
    "converged_explore_share": 1.0,
    "wide_initial_points": 16,
    "listed_initial_points": 6,
    "restart_share": 1.0,
    "restart_sigma": 4.0,
    "settle_progress": 0.01,
    "settle_after": 16,
    "ranking": "auto",
    "length_scales": "per_parameter",
    "local_picks": 1,
    "process_picks_until": 100,
}
# Most feasible configurations a space may list for the Gaussian-process ranking (the kt_rtx
# GEMM space lists 17 956: `ListedProcess` ranks all of them for ~10 ms of one CPU core per
# evaluation at 800-900 evaluations, 29 s in all to 1,000 with the length scales' refits,
# bench/engine_pace.py; a process rebuilt for each pick took ~0.15 s per pick at 100
# evaluations and ~0.4 s at 250).
MAX_LISTED = 50_000
# Per-parameter length scales are refitted every generation up to this many evaluations, then
# once the evaluations have grown by this factor, and not after `SCALES_REFIT_UNTIL`
# evaluations. A fit's L-BFGS steps cost ~n^3 each, and new scales re-condition the process
# over every listed row, ~n^2 N (N listed rows): at 931 evaluations of an 11,130-row space a
# refit cost seconds, the engine's pace otherwise ~5 ms a suggestion (bench/engine_pace.py).
SCALES_REFIT_EVERY_GENERATION = 100
SCALES_REFIT_GROWTH = 1.25
SCALES_REFIT_UNTIL = 400
# A local pick (`local_picks`) changes at most this many parameters of the best configuration.
LOCAL_CHANGES = 2
# An expected improvement within this share of the highest ties with it within rounding
# (`_exact_process`): `ListedProcess`'s and `GaussianProcess`'s differ by at most 1.3e-10 of
# the highest on the replays and the battery's categorical space.
TIE_SHARE = 1e-6


# `_ranked_successes`' cache: the records it has seen, how many, them ranked, their values.
_Ranked = tuple[list[EvaluationRecord], int, list[EvaluationRecord], list[float]]


def _near_tie(gain: np.ndarray, pick: int) -> bool:
    """Whether another value of `gain` is within rounding of its highest, `gain[pick]`."""
    if len(gain) < 2:
        return False
    top = float(gain[pick])
    return top - float(np.partition(gain, -2)[-2]) <= TIE_SHARE * abs(top)


class ScreenedGAConfig(EngineConfig):
    """Settings of `ScreenedGA`; defaults in `SCREENED_DEFAULTS`.

    Args:
        gamma: share of successful evaluations that form the good density l(x).
        max_good: at most this many evaluations form l(x) (Optuna's gamma cap of 25).
        screen_factor: candidates drawn per candidate kept.
        random_share: share of drawn candidates that are uniform random (exploration).
        local_share: share of drawn candidates that are pattern moves around the elite; the
            rest are crossover children of the population.
        bandwidth: kernel width of ordered parameters at one observation, as a fraction of
            the range (`engine/parzen.py`).
        multivariate: one product kernel per observation instead of independent parameters.
        polish_share: share of each generation spent on trust-region moves around the best.
        explore_after: generations without a new best after which part of each generation is
            evaluated unscreened.
        explore_share: share of each generation drawn unscreened while stagnating.
        wide_explore_share: the same share in a space with a wide parameter, where the
            polishing settles in the basin it started in and only coverage finds another.
        explore_sampling: how those are drawn: uniformly, each the farthest of `MAXIMIN_DRAWS`
            uniform draws from everything proposed (maximin), or "auto": maximin in a space
            with a wide parameter, uniform otherwise.
        converged_explore_share: share of each generation explored in a space with a wide
            parameter once the compass search's poll around the best is used up.
        wide_initial_points: size of the first generation in a space with a wide parameter
            (warm-start points included): a scrambled Sobol' design whose rows that break
            the constraints are replaced by maximin draws (at most `pool_size`, or a budget
            in `max_generations`: the first generation of every space, `initial_sampling`).
        listed_initial_points: size of the first generation where the process ranks the
            listed space (`ranking`; warm-start points included): a greedy maximin design, each
            configuration the listed one farthest from those before it (a budget in
            `max_generations`: `pool_size`).
        restart_share: share of each such generation spent instead on a local descent from an
            explored configuration in a basin nobody has descended (`engine/multistart.py`);
            0 never restarts.
        restart_sigma: MLSL's factor of the critical distance within which a configuration
            must be the lowest to start a descent (larger: fewer descents).
        settle_progress: an improvement of the best by less than this share of the values'
            spread (median - best) is no progress.
        settle_after: evaluations without progress after which, in a space with a wide
            parameter, the part of each generation that is not polishing restarts (descends or
            explores) instead of being screened, before the polish's poll is used up.
        ranking: what picks the screened part of a generation: the density ratio over the
            drawn candidates ("parzen"), or the expected improvement of a Gaussian process over
            every never-proposed feasible configuration ("gaussian_process"); "auto": the
            process in a space without a wide parameter that lists at most `MAX_LISTED`
            feasible configurations, unless the search starts from an earlier one
            (`transfer_from`); the ratio elsewhere.
        length_scales: the process's length scales: one for all parameters ("shared"), or one
            per parameter under a prior that keeps them near its whole range
            (`engine/gaussian_process.py`).
        local_picks: of each generation's picks by the process, this many are the highest
            expected improvement among configurations that change at most `LOCAL_CHANGES`
            parameters of the best one (a `steady_state` search's single picks: with
            probability `local_picks` / `pool_size`).
        process_picks_until: in a space with a wide parameter, until the evaluations number
            this many, the screened part of a generation is the drawn candidates of highest
            expected improvement under a Gaussian process (`GeneticEngine._process_picks`),
            not of highest density ratio; 0: always the ratio.
    """

    pool_size: int = Field(default=SCREENED_DEFAULTS["pool_size"], ge=2)
    gamma: float = Field(default=SCREENED_DEFAULTS["gamma"], gt=0, lt=1)
    max_good: int = Field(default=SCREENED_DEFAULTS["max_good"], ge=1)
    screen_factor: int = Field(default=SCREENED_DEFAULTS["screen_factor"], ge=1)
    random_share: float = Field(default=SCREENED_DEFAULTS["random_share"], ge=0, le=1)
    local_share: float = Field(default=SCREENED_DEFAULTS["local_share"], ge=0, le=1)
    bandwidth: float = Field(default=SCREENED_DEFAULTS["bandwidth"], gt=0, le=1)
    multivariate: bool = SCREENED_DEFAULTS["multivariate"]
    polish_share: float = Field(default=SCREENED_DEFAULTS["polish_share"], ge=0, le=1)
    explore_after: int = Field(default=SCREENED_DEFAULTS["explore_after"], ge=1)
    explore_share: float = Field(default=SCREENED_DEFAULTS["explore_share"], ge=0, le=1)
    wide_explore_share: float = Field(default=SCREENED_DEFAULTS["wide_explore_share"], ge=0, le=1)
    explore_sampling: Literal["uniform", "maximin", "auto"] = SCREENED_DEFAULTS["explore_sampling"]
    converged_explore_share: float = Field(
        default=SCREENED_DEFAULTS["converged_explore_share"], ge=0, le=1
    )
    wide_initial_points: int = Field(default=SCREENED_DEFAULTS["wide_initial_points"], ge=0)
    listed_initial_points: int = Field(default=SCREENED_DEFAULTS["listed_initial_points"], ge=1)
    restart_share: float = Field(default=SCREENED_DEFAULTS["restart_share"], ge=0, le=1)
    restart_sigma: float = Field(default=SCREENED_DEFAULTS["restart_sigma"], gt=0)
    settle_progress: float = Field(default=SCREENED_DEFAULTS["settle_progress"], ge=0)
    settle_after: int = Field(default=SCREENED_DEFAULTS["settle_after"], ge=1)
    ranking: Literal["parzen", "gaussian_process", "auto"] = SCREENED_DEFAULTS["ranking"]
    length_scales: Literal["shared", "per_parameter"] = SCREENED_DEFAULTS["length_scales"]
    local_picks: int = Field(default=SCREENED_DEFAULTS["local_picks"], ge=0)
    process_picks_until: int = Field(default=SCREENED_DEFAULTS["process_picks_until"], ge=0)


class ScreenedGA(GA):
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
                self._exhausted = True
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
        if self._stagnant >= config.explore_after:
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

    def _ranks_by_process(self) -> bool:
        """Whether the Gaussian process ranks (`ranking`), listing the space on first use."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        if config.ranking == "parzen":
            return False
        if config.ranking == "auto" and any(o == "transfer" for _, o in self._warm_start):
            # From an earlier search's best, the ratio's pattern moves around them got there
            # sooner (kt_rtx GEMM, 30 seeds: 36 evaluations to 95 % vs 46.5; transfer's
            # choosing set, convolution_milo: 87.5 vs over 250; docs/benchmarks.md,
            # "Replays of recorded spaces").
            return False
        if getattr(self, "_listed", None) is None:
            self._listed = self._list_space(config.ranking == "auto")
        return bool(self._listed)

    def _list_space(self, only_short_lists: bool) -> list[Genes]:
        """Every feasible configuration, or none where `auto` keeps the ratio (a wide
        parameter, or more than `MAX_LISTED` feasible configurations)."""
        if only_short_lists and (
            self._wide() or (not self.space.constraints and self.space.cardinality() > MAX_LISTED)
        ):
            return []
        if self.space.cardinality() > MAX_ENUMERATION:
            if not only_short_lists:
                raise EngineError(
                    f"ranking='gaussian_process' lists the space, which has "
                    f"{self.space.cardinality():.3g} combinations, more than {MAX_ENUMERATION}"
                )
            return []
        listed = list(self.space.iter_genes())
        if len(listed) > MAX_LISTED:
            if not only_short_lists:
                raise EngineError(
                    f"ranking='gaussian_process' ranks at most {MAX_LISTED} feasible "
                    f"configurations, the space has {len(listed)}"
                )
            return []
        self._listed_X = self._process_features(listed)
        self._listed_genes = np.array([list(g) for g in listed], dtype=object)
        self._listed_index = {tuple(g): i for i, g in enumerate(listed)}
        return listed

    def _expected_improvement_picks(self, n: int) -> list[Candidate]:
        """`n` never-proposed configurations of the listed space, each the one of highest
        expected improvement under a Gaussian process fitted to the evaluations (log values
        when all are positive; failures at the worst value) and to the candidates out or picked
        before it, at their predicted values (the kriging believer, Ginsbourger et al.,
        "Kriging is well-suited to parallelize optimization", 2010). The last `local_picks`
        choose only among configurations near the best (`LOCAL_CHANGES`): over the whole space
        the highest expected improvement near the optimum goes to configurations that change
        many parameters at once, as the process cannot resolve a few per cent there.

        The process is `ListedProcess`, `GaussianProcess` kept from one generation to the next
        over the listed rows (the same predictions, up to rounding, for O(n N) per pick where
        a process rebuilt for each costs O(n^2 N))."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        ok = [r for r in self._records if r.ok]
        if n <= 0 or len(ok) < 2:
            return []
        values = np.array([self._value(r) for r in ok])
        if np.all(values > 0):
            values = np.log(values)
        failed = [r for r in self._records if not r.ok]
        y = np.concatenate([values, np.full(len(failed), values.max())])
        believed = [*self._pending.values(), *self._queue]
        fresh = np.ones(len(self._listed), dtype=bool)
        for g in [*(r.genes for r in self._records), *(c.genes for c in believed)]:
            i = self._listed_index.get(tuple(g))
            if i is not None:
                fresh[i] = False
        near = self._near(self._split()[0][0].genes)
        n_local = config.local_picks
        if config.steady_state:  # one pick at a time: local at the generational share
            n_local = int(self.rng.random() < config.local_picks / config.pool_size)
        process = self._listed_process(ok, failed, values, y)
        if believed:
            B = self._process_features([c.genes for c in believed])
            listed = [self._listed_index.get(tuple(c.genes), -1) for c in believed]
            process.believe_all([c.key for c in believed], B, process.predict_points(B), listed)
        near_rows = np.flatnonzero(near)
        exact: GaussianProcess | None = None  # `GaussianProcess` itself, from a near tie on
        picked: list[tuple[np.ndarray, int, int | None]] = []
        out: list[Candidate] = []
        while len(out) < n and fresh.any():
            local = len(out) >= n - n_local and bool((fresh & near).any())
            rows = np.flatnonzero(fresh & near if local else fresh)
            if exact is None:
                mean, sd = process.predict(rows)
                gain = expected_improvement(mean, sd, process.best)
                pick = int(np.argmax(gain))
                if _near_tie(gain, pick):
                    exact = self._exact_process(ok, failed, y, believed, picked)
            if exact is not None:
                mean, sd = exact.predict(self._listed_X[rows])
                pick = int(np.argmax(expected_improvement(mean, sd, exact.best)))
            row = int(rows[pick])
            fresh[row] = False
            candidate = self._make_candidate(self._listed[row], "offspring")
            picked.append((rows, pick, None if candidate is None else row))
            if candidate is None:
                continue
            out.append(candidate)
            if len(out) == n or not fresh.any():  # no pick follows to see this one
                break
            X = self._listed_X[row : row + 1]
            if exact is not None:
                exact = exact.believing(X, mean[pick : pick + 1])
            else:
                local = len(out) >= n - n_local and bool((fresh & near).any())
                cols = near_rows if local else None
                process.believe(candidate.key, X, mean[pick : pick + 1], row, cols)
        return out

    def _exact_process(
        self,
        ok: list[EvaluationRecord],
        failed: list[EvaluationRecord],
        y: np.ndarray,
        believed: list[Candidate],
        picked: list[tuple[np.ndarray, int, int | None]],
    ) -> GaussianProcess:
        """The `GaussianProcess` of the evaluations and the candidates out, rebuilt from them
        and taken through the picks so far (`picked`: the rows ranked, the pick among them, its
        row if it was proposed): where the highest expected improvement is a tie within
        rounding (two configurations one unordered value apart and equally far from every
        evaluation), the pick is `GaussianProcess`'s, so that the search proposes what a
        process rebuilt for each pick would, whatever `ListedProcess`'s rounding."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        fitted = [*ok, *failed]
        X = self._process_features([r.genes for r in fitted], [r.key for r in fitted])
        if config.length_scales == "shared":
            process = GaussianProcess(X, y)
        else:
            process = GaussianProcess(X, y, self._scales, noise=self._noise)
        if believed:
            B = self._process_features([c.genes for c in believed])
            process = process.believing(B, process.predict(B)[0])
        for rows, pick, row in picked:
            if row is not None:
                mean = process.predict(self._listed_X[rows])[0]
                process = process.believing(self._listed_X[row : row + 1], mean[pick : pick + 1])
        return process

    def _near(self, best: Genes) -> np.ndarray:
        """Which listed configurations change at most `LOCAL_CHANGES` parameters of `best`."""
        if getattr(self, "_listed_codes", None) is None:
            # Each column's genes as codes, equal where the genes are.
            self._gene_codes: list[dict[Any, int]] = [{} for _ in self.space.leaves]
            codes = np.empty(self._listed_genes.shape, dtype=np.int64)
            for j, column in enumerate(self._listed_genes.T):
                index = self._gene_codes[j]
                codes[:, j] = [index.setdefault(g, len(index)) for g in column]
            self._listed_codes = codes
        own = [index.get(g, -1) for index, g in zip(self._gene_codes, best, strict=True)]
        return (self._listed_codes != np.array(own)).sum(1) <= LOCAL_CHANGES

    def _listed_process(
        self,
        ok: list[EvaluationRecord],
        failed: list[EvaluationRecord],
        values: np.ndarray,
        y: np.ndarray,
    ) -> ListedProcess:
        """The process of the evaluations over the listed rows: length scales and noise as
        `_process_hyperparameters` says, conditioned on every evaluation (`y`: the successes'
        `values`, then the failures')."""
        scales, noise, batch = self._process_hyperparameters(ok, failed, y)
        process = getattr(self, "_listed_gp", None)
        if process is None or not process.fits(scales, noise):
            process = self._listed_gp = ListedProcess(self._listed_X, scales, noise)
        records = self._records
        is_failed = np.array([not r.ok for r in records])
        in_order = np.zeros(len(records))
        in_order[~is_failed] = values

        def points(i: int, j: int) -> tuple[np.ndarray, list[int]]:
            chosen = records[i:j]
            X = self._process_features([r.genes for r in chosen], [r.key for r in chosen])
            return X, [self._listed_index.get(tuple(r.genes), -1) for r in chosen]

        keys = [r.key for r in records]
        process.update(keys, points, in_order, is_failed, y, batch)
        return process

    def _process_hyperparameters(
        self, ok: list[EvaluationRecord], failed: list[EvaluationRecord], y: np.ndarray
    ) -> tuple[float | np.ndarray, float, int]:
        """The process's length scales and noise, and the evaluations they were fitted to
        (`batch` of `ListedProcess.update`): per-parameter scales (`length_scales`) and the
        noise are refitted on the schedule of `SCALES_REFIT_GROWTH` up to `SCALES_REFIT_UNTIL`
        evaluations and reused in between and after;
        one shared scale is chosen from `LENGTH_SCALES` by the likelihood every time."""
        records = self._records
        told = (len(records), records[-1].candidate_id if records else None)
        if getattr(self, "_hyperparameters_told", None) == told:
            # Nothing told since the last fit (asks between two results): the same fit.
            return self._hyperparameters
        self._hyperparameters: tuple[float | np.ndarray, float, int] = self._fit_hyperparameters(
            ok, failed, y
        )
        self._hyperparameters_told = told
        return self._hyperparameters

    def _fit_hyperparameters(
        self, ok: list[EvaluationRecord], failed: list[EvaluationRecord], y: np.ndarray
    ) -> tuple[float | np.ndarray, float, int]:
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        n = len(y)
        scales, fitted_at = getattr(self, "_scales", None), getattr(self, "_scales_at", 0)
        reuse = n > SCALES_REFIT_EVERY_GENERATION and (
            n < SCALES_REFIT_GROWTH * fitted_at or n > SCALES_REFIT_UNTIL
        )
        if config.length_scales != "shared" and scales is not None and reuse:
            return scales, self._noise, fitted_at
        fitted = [*ok, *failed]
        X = self._process_features([r.genes for r in fitted], [r.key for r in fitted])
        if config.length_scales == "shared":
            process = GaussianProcess(X, y)
            return process.length_scale, process.noise, n
        scales, noise = fitted_hyperparameters(X, y)
        self._scales, self._scales_at = np.asarray(scales), n
        self._noise = noise
        return self._scales, noise, n

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

    def _split(self) -> tuple[list[EvaluationRecord], list[EvaluationRecord]]:
        """Good (best `gamma` share of successes, at most `max_good`, best first) and other
        records (the rest of the successes and every failure)."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        ok = self._ranked_successes()
        n_good = min(max(1, math.ceil(config.gamma * len(ok))), config.max_good) if ok else 0
        good = ok[:n_good]
        ids = {r.candidate_id for r in good}
        return good, [r for r in self._records if r.candidate_id not in ids]

    def _ranked_successes(self) -> list[EvaluationRecord]:
        """The successful evaluations, lowest value (`_value`) first, ties in the order told:
        a stable sort's order, kept up to date as evaluations arrive (each goes in after the
        equal ones before it)."""
        records = self._records
        ranked: _Ranked | None = getattr(self, "_ranked", None)
        if ranked is None or ranked[0] is not records or ranked[1] > len(records):
            ranked = (records, 0, [], [])
        _, seen, order, values = ranked
        for record in records[seen:]:
            if record.ok:
                value = self._value(record)
                at = bisect.bisect_right(values, value)
                values.insert(at, value)
                order.insert(at, record)
        self._ranked = (records, len(records), order, values)
        return order

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
