"""Breeding of the GA family: offspring pre-selected by a Gaussian process, immigrants after
stagnation.

Pre-selection (Emmerich et al., "Metamodel-assisted evolution strategies", PPSN 2002, and IEEE
TEC 2006, who screen with a Gaussian random field's expected improvement; Jin, "A comprehensive
survey of fitness approximation in evolutionary computation", Soft Computing 2005): each
generation breeds `preselection` x `pool_size` children by the strategy's own selection,
crossover, mutation and pattern moves, and evaluates `pool_size` of them, picked one at a time
by expected improvement under a Gaussian process of the successful evaluations
(`engine/gaussian_process.py`, the `screened` strategy's: per-parameter length scales, fitted
noise; log values where positive; with several objectives the sum of each scaled to its spread),
times the child's chance to succeed (Parzen densities of the successes and the failures,
`engine/parzen.py`); each pick joins the process at its predicted value (the kriging believer),
so a generation's picks spread. The density ratio l(x)/g(x) of the best quarter to the rest, as
the pre-selection, picks near-copies of the first design's best points: nsga2's first bred
children gained what random draws gain (battery `powers_of_two`, seeds 100-199, median regret at
25 evaluations 18 with the ratio, 11 with the process, random search 19.8; cells behind random
search per block of 20 seeds, 12 problems x 25-200 evaluations: nsga2 2.4 -> 0.8, ga 1.0 -> 0.6;
docs/benchmarks.md, "Synthetic battery"). A failure
is no value for the process: at the worst value it would put a cliff next to an optimum at a
failing region's edge (battery `failures`, nsga2 seeds at the optimum within 200: 28 of 100 so,
39 without; the chance of success only breaks near-ties of expected improvement: 39 with it too,
worst seed at 200 45 -> 26). Only the first `preselected_generations` (4) bred generations are
pre-selected. A density ratio could pre-select only 2: later its kernels are wider than the
converged population, so it favours children away from the crowd over better ones (a 1000 x 1000
bowl stalled from 100 to 800 evaluations). The process has no such blind spot: 4 generations
rather than 2 take nsga2's cells behind random search per block (seeds 100-199, to 200) 0.8 ->
0.2 and its seeds at the optimum 578 -> 704 (ga 0.6 -> 0.4, 771 -> 847); all of them, 0.4 and
731 (`multi_basin` @200 median 3.52 -> 4.72, random search 5.01), and a process fitted to every
evaluation of a long search costs what `screened` spends on its refits. The first `local_after`
bred generations are recombined only, without pattern moves: around a first design's best point,
the ratio preferred short steps from it over recombinations of the design, which cover more
(median regret of ga at 25 evaluations on the battery's continuous space: 1.65 with the moves,
1.22 without, random search 1.47). The survival (fitness, or NSGA-II/III's) is untouched.

Uniform draws in the pool: in a space with a wide parameter the pre-selected pool also holds
`preselection_draws` uniform random configurations per bred child, as `screened`'s drawn pool
does. Bred children recombine the first design's values, so a branch or basin that design missed
was found only by chance; the process picks a draw where its uncertainty outweighs the
children's predicted gain (battery, 12 wide problems, seeds 100-199: worst seed at 100
evaluations on `conditional` ga 4.02 -> 0.64, nsga2 4.2 -> 1.0; seeds at the optimum within 200,
of 1200, ga 926 -> 941, nsga2 714 -> 744; fewer on `failures`, ga 95 -> 79, and
`continuous_valley`, 54 -> 46, whose optima need the children's local refinement. Half a draw
per child reached the optimum within 200 more often, 953 and 749, but left larger worst seeds at
50-100 evaluations; checked on seeds 1000-1499 at 25 and 50 evaluations; docs/benchmarks.md,
"the GA family's pre-selected pool gets uniform draws").

Immigrants (Grefenstette's random immigrants, 1992; a partial restart from stagnation):
after `immigrate_after` generations without progress (no evaluation better than every earlier
one by more than `progress_tolerance` of the values' spread, median - best: a search creeping
along the floor of a wide, shallow basin is not progressing), a binomial `immigrant_share`
of each generation is random configurations, each the farthest from everything proposed
among `MAXIMIN_DRAWS` uniform draws (maximin in unit coordinates); with `compound_immigrants`
each further generation without progress breeds only `1 - immigrant_share` of what the one
before bred.
A search settled in a wide basin so keeps sampling the space where a narrow, deeper one may
hide, at nearly random search's rate once it has settled for long.

The spread, not the value: measured against the value, a gain depends on the objective's offset
(`conditional`'s values start at 20, where 1 % is 0.2; `continuous_basins`' widest floor is 1,
where it is 0.01, so creeping along it counts as progress and `ga`'s median at 100 evaluations
sat on that floor, behind random search's). With 0.05 of the spread a wide bowl still improving
by a few per cent of its value counts as stagnating, and a neighbour poll of its wide parameters
would crawl (below). The spread with the poll of short parameters only, against 0.01 of the
value with every parameter polled (battery, 15 problems, seeds 100-199 and 200-299, 25-200):
seeds at the optimum within 200, of 1500 per set, ga 913 -> 1225 and 905 -> 1221, nsga2 742 ->
946 and 740 -> 969; `ga` behind random search in no median and in one worst seed, at 25
evaluations (docs/benchmarks.md, "Synthetic battery").

Neighbour poll (the poll step of pattern search, Hooke & Jeeves 1961, on stagnation): with
`poll_neighbours`, a stagnating generation first proposes the configurations one short
parameter (at most `WIDE_VALUES` values) away from the best evaluation (`Parameter.neighbors`:
every other category or knockout state, one step of an ordered value) that were never
proposed. Random children find a neighbour of the best only by chance: on the battery's
categorical space, seed 12, `ga` sat one category from the optimum from evaluation 124 to 800.
One value of a wide parameter is a crawl: on `int_wide` (seed 286) the poll moved the best one
value of 1000 a generation, each a new best (b -167 -> -161 from evaluation 49 to 129, the
optimum at -123); the compass poll below moves those by steps that grow while they gain.

Polish (the compass search of `screened`, `engine/coordinate_search.py`): in a space with a
wide parameter, the first `polish_generations` bred generations start with `polish_share` of
poll points around the best evaluation. Children of a 16-point design are no closer to a
narrow optimum than random draws, and the battery's wide bowls were behind random search at 25
evaluations; a poll moves the best one parameter at a time, by an eighth of its range and
finer (battery, wide problems, seeds 100-199, cells behind random search at 25-200 per block
of 20: ga 2.0 -> 0.8, nsga2 4.0 -> 2.0). A stagnating generation polls too, once the
neighbour poll below has proposed every neighbour of the best: the compass search then moves
pairs of parameters together, the only way along a constraint's diagonal boundary (battery
`constrained`, seeds 100-139 at 300 evaluations, seeds short of the optimum: ga 13 -> 0,
nsga2 18 -> 3). Polled before the neighbours, its gains of over 1 % kept generations from
counting as stagnating, and on `multi_basin` fewer seeds entered the global basin by 200
evaluations (of seeds 100-199: ga 63 -> 48, nsga2 51 -> 37; after the neighbours 61, 52).
Short-list spaces are not polished.

Restarts (multi-level single linkage, `engine/multistart.py`, as in `screened`): in a space with
a wide parameter, a stagnating generation then spends `restart_share` of the rest on local
descents, each a coarse compass search from a random or immigrant configuration lower than
every evaluation within MLSL's critical distance (`restart_sigma`), before immigrants. An
immigrant counts only if it lands lower than the best; one that falls into the slope of a
narrow, deeper basin is news too, and a descent from it finds the basin (the battery's
four-basin space, seeds 100-199: ga entered the global basin by 200 evaluations in 34 seeds
without, 51 with; random search 45). With several objectives "lower" is the sum of the
objectives, each scaled to its spread (`_restart_values`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
from pymoo.core.population import Population
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from ciq_tune.engine.base import Engine
from ciq_tune.engine.config import GeneticConfig
from ciq_tune.engine.coordinate_search import CompassSearch
from ciq_tune.engine.features import UnitFeatures
from ciq_tune.engine.features import process_coordinates
from ciq_tune.engine.gaussian_process import GaussianProcess
from ciq_tune.engine.gaussian_process import expected_improvement
from ciq_tune.engine.multistart import Restarts
from ciq_tune.engine.multistart import Samples
from ciq_tune.engine.multistart import critical_distance
from ciq_tune.engine.operators.sampling import initial_sampling
from ciq_tune.engine.parzen import ParzenEstimator
from ciq_tune.engine.proposals import Candidate
from ciq_tune.results import EvaluationRecord
from ciq_tune.results import non_dominated
from ciq_tune.space.space import Genes

# Kernel width of ordered parameters at one observation, as a fraction of the range (the
# `screened` strategy's default), for the chance of success.
BANDWIDTH = 0.2
# A parameter with more values than this (or a continuous one) is wide: one step of it is
# narrower than the model's kernels, so spaces with one are polished by `screened` and get
# local descents (short lists do not: on the recorded kernel spaces both cost evaluations the
# model and breeding spend better).
WIDE_VALUES = 32


def value_spread(values: np.ndarray) -> np.ndarray:
    """The median of `values` minus the best (lowest), per column (objective): the scale a
    gain is measured against, independent of the objective's offset."""
    return np.median(values, axis=0) - values.min(axis=0)


class GeneticEngine(Engine):
    """`Engine` whose offspring are pre-selected and joined by immigrants after stagnation
    (see the module docstring); the strategies set their selection ranks and survival."""

    def _first_generation(self) -> list[Candidate]:
        """A design of `first_design_size` points (at most `pool_size`; all of it with a budget
        in generations, which promises `pool_size` per generation) by `initial_sampling`, its
        rows that break the constraints replaced by maximin draws."""
        config = self.config
        if not isinstance(config, GeneticConfig):  # `screened` builds its own first design
            return super()._first_generation()
        size = config.pool_size
        if self.budget.max_generations is None:
            size = min(size, config.first_design_size)
        sampling = initial_sampling(config.initial_sampling, drop_infeasible=True)
        first = self._first_design(size, sampling)
        return first + self._maximin_candidates(size - len(first), self._unit_features(), first)

    def _offspring(self, n: int) -> list[Candidate]:
        config: GeneticConfig = self.config  # type: ignore[assignment]
        out: list[Candidate] = []
        last_polished = config.polish_generations
        stalled = self._generations_without_progress()
        after = config.immigrate_after
        stagnating = after is not None and stalled >= after
        polish = round(config.polish_share * n) if self._wide() else 0
        if not stagnating and (last_polished is None or self.generation <= last_polished):
            out += self._polished(polish)
        if after is not None and stagnating:
            neighbours = self._best_neighbours(n) if config.poll_neighbours else []
            out += neighbours
            if not neighbours:
                out += self._polished(polish)
            # Each further generation without progress breeds `1 - immigrant_share` of the
            # share bred before (0.75, 0.94, ... immigrants for a share of 0.75), never none.
            repeats = stalled - after + 1 if config.compound_immigrants else 1
            share = 1.0 - (1.0 - config.immigrant_share) ** repeats
            # Descents first (none while no evaluation may start one), immigrants after.
            out += self._descend(round(config.restart_share * (n - len(out))))
            out += self._immigrants(int(self.rng.binomial(n - len(out), share)))
        last = config.preselected_generations
        if config.preselection > 1 and (last is None or self.generation <= last):
            out += self._preselected(n - len(out), config.preselection)
        return out + super()._offspring(n - len(out))

    def _bred(self, n: int) -> Population:
        """As `Engine._bred`, but the first `local_after` bred generations are recombined
        only: pattern moves there are short steps around the first design's best point."""
        config: GeneticConfig = self.config  # type: ignore[assignment]
        if self.generation > config.local_after:
            return super()._bred(n)
        children = self._children(math.ceil(n / 2))
        return self.repair.do(self.problem, children, random_state=self.rng)

    def _generations_without_progress(self) -> int:
        """Closed generations since the last evaluation that improved on every earlier one by
        more than `progress_tolerance` of the spread of the successful values before it
        (`value_spread`, per objective), in some objective: a search refining a wide, shallow
        basin by ever smaller steps counts as stagnating, whatever the objective's offset.
        Derived from the records (the saved state), incrementally: records are only ever
        appended."""
        tolerance = self.config.progress_tolerance  # type: ignore[attr-defined]
        if not hasattr(self, "_progress_seen"):
            self._progress_seen = 0
            self._progress_front: list[np.ndarray] = []
            self._progress_values: list[np.ndarray] = []
            self._progress_last = 0
        front = self._progress_front
        for record in self._records[self._progress_seen :]:
            if not record.ok:
                continue
            new = record.minimised(self.objectives)
            if self._progress_values:
                margin = tolerance * value_spread(np.array(self._progress_values))
                if not any(np.all(old <= new + margin) for old in front):
                    self._progress_last = max(self._progress_last, record.generation)
            self._progress_values.append(new)
            if not any(np.all(old <= new) for old in front):
                F = np.array([*front, new])
                front = list(F[non_dominated(F)])
        self._progress_front = front
        self._progress_seen = len(self._records)
        return max(self.generation - 1 - self._progress_last, 0)

    def _best_neighbours(self, n: int) -> list[Candidate]:
        """Up to `n` unproposed configurations one short parameter (at most `WIDE_VALUES`
        values) away from the best evaluation (the first non-dominated one with several
        objectives; `Parameter.neighbors`: every other category or knockout state, one step of
        an ordered value), in random order. One value of a wide parameter is a crawl: the
        compass poll (`_polished`) moves those, by steps that grow while they gain."""
        best_record = self._best()
        if n <= 0 or best_record is None:
            return []
        best = best_record.genes
        rows: list[tuple] = []
        for j, leaf in enumerate(self.space.leaves):
            if leaf.param.cardinality() > WIDE_VALUES:
                continue
            rows += [(*best[:j], gene, *best[j + 1 :]) for gene in leaf.param.neighbors(best[j])]
        fresh = self.proposals.new_genes(rows)
        out: list[Candidate] = []
        for i in self.rng.permutation(len(fresh))[:n]:
            candidate = self._make_candidate(fresh[int(i)], "offspring")
            if candidate is not None:
                out.append(candidate)
        return out

    def _wide(self) -> bool:
        """Whether the space has a wide parameter (`WIDE_VALUES`)."""
        return any(p.cardinality() > WIDE_VALUES for p in self.space.params)

    def _multistart(self) -> Restarts:
        if getattr(self, "_restarts", None) is None:
            self._restarts = Restarts(self.space)
        return self._restarts

    def _compass_search(self) -> CompassSearch:
        if getattr(self, "_compass", None) is None:
            self._compass = CompassSearch(self.space)
        return self._compass

    def _strategy_state(self) -> dict[str, Any]:
        return {"restarts": self._multistart().state(), "compass": self._compass_search().state()}

    def _load_strategy_state(self, state: Mapping[str, Any]) -> None:
        if "restarts" in state:
            self._multistart().load_state(state["restarts"])
        if "compass" in state:
            self._compass_search().load_state(state["compass"])

    def _polished(self, n: int) -> list[Candidate]:
        """Candidates of up to `n` polish points (`_polish`; `screened` has its own)."""
        polled = self._polish(n)
        return [c for g in polled if (c := self._make_candidate(g, "offspring")) is not None]

    def _polish(self, n: int) -> list[Genes]:
        """About `n` new compass-search poll points around the best evaluation (the first
        non-dominated one with several objectives)."""
        best = self._best()
        if n <= 0 or best is None:
            return []
        return self._compass_search().poll(
            best.genes, n, self.proposals.new_genes, self.rng, self._polish_values()
        )

    def _polish_values(self) -> dict[Genes, float]:
        """`_value` of each successful evaluation, for the polish's quadratic model."""
        return {r.genes: self._value(r) for r in self._records if r.ok}

    def _value(self, record: EvaluationRecord) -> float:
        """One value to minimise per evaluation (with several objectives, their sum); worked
        out once per evaluation."""
        values: dict[int, float] = self.__dict__.setdefault("_values_by_id", {})
        value = values.get(record.candidate_id)
        if value is None:
            value = values[record.candidate_id] = float(np.sum(record.minimised(self.objectives)))
        return value

    def _descend(self, n: int) -> list[Candidate]:
        """Up to `n` poll points of a local descent (`engine/multistart.py`) from a random or
        immigrant configuration that is lower than every evaluation within MLSL's critical
        distance (not from the best: breeding and the neighbour poll work around it)."""
        # Wide spaces only: on short-list kernel spaces descents cost what breeding spends
        # better (evaluations to 95 % on the 2018 AMD GEMM replay, 20 seeds: 112 -> 194).
        config: GeneticConfig = self.config  # type: ignore[assignment]
        ok = [r for r in self._records if r.ok]
        if n <= 0 or len(ok) < 2 or not self._wide():
            return []
        features = self._unit_features()
        X = np.nan_to_num(features([r.genes for r in ok], [r.key for r in ok]), nan=-1)
        values = self._restart_values(np.array([r.minimised(self.objectives) for r in ok]))
        best = int(np.argmin(values))
        eligible = [i != best and r.origin != "offspring" for i, r in enumerate(ok)]
        samples = Samples(
            ids=[r.candidate_id for r in ok],
            genes=[r.genes for r in ok],
            X=X,
            values=values,
            radius=critical_distance(len(ok), X.shape[1], config.restart_sigma),
        )
        make = partial(self._make_candidate, origin="offspring")
        out: list[Candidate] = []
        while len(out) < n:
            # A poll comes back short (four points on a plane); the rest goes to the same
            # descent's next, finer poll or to the next descent.
            polled = self._multistart().propose(
                samples, eligible, n - len(out), self.proposals.new_genes, make, self.rng
            )
            if not polled:
                break
            out += polled
        return out

    @staticmethod
    def _restart_values(F: np.ndarray) -> np.ndarray:
        """What "lower" means for MLSL's rule: the objective, or with several the sum of the
        objectives, each scaled to the spread of its values (a weighted sum: a descent heads
        for the front's convex part; an objective given twice ranks as given once)."""
        if F.shape[1] == 1:
            return F[:, 0]
        spread = np.ptp(F, axis=0)
        return np.sum((F - F.min(axis=0)) / np.where(spread > 0, spread, 1.0), axis=1)

    def _preselected(self, n: int, factor: int) -> list[Candidate]:
        """Up to `n` new configurations picked by `_process_picks` from `factor` x `n` bred
        children and, in a space with a wide parameter, `preselection_draws` uniform random
        configurations per child."""
        # Checked before breeding too: breeding draws from the random stream.
        if n <= 0 or sum(r.ok for r in self._records) < 2:
            return []
        config: GeneticConfig = self.config  # type: ignore[assignment]
        rows = [tuple(x) for x in self._bred(n * factor).get("X")]
        if self._wide():
            draws = math.ceil(config.preselection_draws * n * factor)
            rows += [self.space.sample_genes(self.rng) for _ in range(draws)]
        return self._process_picks(self.proposals.new_genes(rows), n)

    def _process_picks(self, pool: list[Genes], n: int) -> list[Candidate]:
        """Up to `n` configurations of `pool` (distinct, never proposed), picked one at a time
        by expected improvement under a Gaussian process of the successful evaluations, weighted
        by each one's chance to succeed (`_log_success_chance`); each pick joins the process at
        its predicted value before the next (the kriging believer, Ginsbourger et al. 2010)."""
        ok = [r for r in self._records if r.ok]
        if n <= 0 or len(ok) < 2 or not pool:
            return []
        F = np.array([r.minimised(self.objectives) for r in ok])
        # Log values where an objective is positive throughout (times: a few per cent apart
        # near the optimum, orders of magnitude away from it), then `_restart_values`' scaling.
        positive = np.all(F > 0, axis=0)
        F = np.where(positive, np.log(np.where(positive, F, 1.0)), F)
        X = self._process_features([r.genes for r in ok], [r.key for r in ok])
        process = GaussianProcess(X, self._restart_values(F), per_coordinate=True)
        P = self._process_features(pool)
        log_success = self._log_success_chance(pool)
        open_rows = np.ones(len(pool), dtype=bool)
        out: list[Candidate] = []
        while len(out) < n and open_rows.any():
            rows = np.flatnonzero(open_rows)
            mean, sd = process.predict(P[rows])
            gain = expected_improvement(mean, sd, process.best)
            pick = int(np.argmax(np.log(np.maximum(gain, 1e-300)) + log_success[rows]))
            row = int(rows[pick])
            open_rows[row] = False
            candidate = self._make_candidate(pool[row], "offspring")
            if candidate is None:
                continue
            out.append(candidate)
            process = process.believing(P[row : row + 1], mean[pick : pick + 1])
        return out

    def _log_success_chance(self, genes: list[Genes]) -> np.ndarray:
        """log P(success) of each configuration: the share of the successes' Parzen density
        (`engine/parzen.py`) in that of all evaluations, each weighted by its count; 0 where
        nothing has failed. A failure is no value for the process: at the worst value it would
        put a cliff next to an optimum at the edge of a failing region."""
        ok = [r for r in self._records if r.ok]
        failed = [r for r in self._records if not r.ok]
        if not failed:
            return np.zeros(len(genes))
        model, features = self._ratio_model(), self._unit_features()
        X = features(genes)
        good = model.log_density(X, features([r.genes for r in ok], [r.key for r in ok]))
        bad = model.log_density(X, features([r.genes for r in failed], [r.key for r in failed]))
        good += math.log(len(ok))
        return good - np.logaddexp(good, bad + math.log(len(failed)))

    def _process_features(self, genes: list[Genes], keys: list[str] | None = None) -> np.ndarray:
        """The Gaussian process's coordinates of `genes` (`process_coordinates`)."""
        return process_coordinates(self.space, self._unit_features()(genes, keys))

    def _best(self) -> EvaluationRecord | None:
        """The lowest successful evaluation (with several objectives, the first of the first
        non-dominated front)."""
        ok = [r for r in self._records if r.ok]
        if not ok:
            return None
        F = np.array([r.minimised(self.objectives) for r in ok])
        if len(self.objectives) == 1:
            return ok[int(np.argmin(F[:, 0]))]
        return ok[int(NonDominatedSorting().do(F)[0][0])]

    def _ratio_model(self) -> ParzenEstimator:
        """The Parzen estimator of the successes-to-failures ratio (`_log_success_chance`), in
        the unit coordinates of `_unit_features`."""
        if getattr(self, "_ratio_parzen", None) is None:
            self._ratio_parzen = ParzenEstimator(self.space, bandwidth=BANDWIDTH, multivariate=True)
        return self._ratio_parzen

    def _unit_features(self) -> UnitFeatures:
        """The unit coordinates of configurations, one cache of the evaluated rows for every
        model here (the ratio, the process, the maximin draws, the descents)."""
        if getattr(self, "_unit_features_cache", None) is None:
            self._unit_features_cache = UnitFeatures(self.space)
        return self._unit_features_cache

    def _immigrants(self, n: int) -> list[Candidate]:
        """`n` random configurations far from everything proposed (`_maximin_candidates`)."""
        return self._maximin_candidates(n, self._unit_features())
