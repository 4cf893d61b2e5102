"""How an engine makes candidates: the first design (warm-start points, then a sampling), the
offspring of its population (binary tournament, uniform crossover, per-parameter mutation and a
share of pattern moves of the elite, then constraint repair), uniform and maximin random draws,
each never proposed before (`ProposalArchive`).

`Variation` is a base of `Engine` (`engine/base.py`) and holds nothing but this: the fields it
reads are declared below and set by `Engine.__init__`; a strategy overrides a maker (`_bred`,
`_random_candidates`, its `_first_generation`) where it makes candidates its own way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pymoo.core.population import Population
from pymoo.core.sampling import Sampling
from pymoo.operators.crossover.ux import UniformCrossover
from pymoo.operators.selection.tournament import TournamentSelection

from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.features import UnitFeatures
from ciq_tune.engine.loop import LoopState
from ciq_tune.engine.operators import FeasibilityRepair
from ciq_tune.engine.operators import ParameterMutation
from ciq_tune.engine.operators import SpaceProblem
from ciq_tune.engine.operators.mutation.pattern_move import PatternMove
from ciq_tune.engine.proposals import Candidate
from ciq_tune.engine.proposals import Origin
from ciq_tune.engine.proposals import ProposalArchive
from ciq_tune.results import EvaluationRecord
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import MAX_ENUMERATION
from ciq_tune.space.space import Genes

# Attempts at producing a child not seen before, before falling back to a random candidate.
UNIQUE_CHILD_TRIES = 30
# Random draws tried for an unseen candidate before enumerating the rest of a finite space.
UNIQUE_RANDOM_TRIES = 200

# Uniform draws per maximin candidate; the one farthest from everything proposed is kept.
MAXIMIN_DRAWS = 32
# Pattern-move children start from this best share of the population (elitist local search).
ELITE_SHARE = 0.25


class Variation:
    """The candidate makers of an engine (see the module docstring)."""

    space: SearchSpace
    config: EngineConfig
    rng: np.random.Generator
    problem: SpaceProblem
    mutation: ParameterMutation
    crossover: UniformCrossover
    local_move: PatternMove
    repair: FeasibilityRepair
    sampling: Sampling
    selection: TournamentSelection
    proposals: ProposalArchive
    loop: LoopState
    _queue: list[Candidate]
    _pending: dict[int, Candidate]
    _records: list[EvaluationRecord]
    _population: list[EvaluationRecord]
    _warm_start: list[tuple[Genes, str]]

    if TYPE_CHECKING:  # what `Engine` provides

        @property
        def generation(self) -> int: ...

        def _parent_ranks(self, population: list[EvaluationRecord]) -> np.ndarray: ...

    def _first_design(self, size: int, sampling: Sampling) -> list[Candidate]:
        """The warm-start points, then candidates drawn by `sampling` up to `size`."""
        first: list[Candidate] = []
        for genes, origin in self._warm_start:
            candidate = self._make_candidate(genes, origin)  # type: ignore[arg-type]
            if candidate is not None:
                first.append(candidate)
        missing = max(size - len(first), 0)
        return first + self._random_candidates(missing, sampling)

    def _variation_or_random(self, n: int) -> list[Candidate]:
        if len(self._population) >= 2:
            return self._offspring(n)
        return self._random_candidates(n)

    def _offspring(self, n: int) -> list[Candidate]:
        """`n` new, feasible, never-seen children of tournament-selected parents: a binomial
        `local_share` of pattern moves (elitist local search, coarse and fine steps at once),
        the rest recombined and mutated."""
        out: list[Candidate] = []
        for genes in self._bred(n).get("X")[:n]:
            candidate = self._unique_child(tuple(genes))
            if candidate is None:
                break
            out.append(candidate)
        return out

    def _bred(self, n: int) -> Population:
        """About `n` feasible children (some may repeat earlier proposals): a binomial
        `local_share` of pattern moves of the elite, the rest recombined and mutated."""
        n_local = int(self.rng.binomial(n, self.config.local_share))
        children = Population.merge(
            self._local_children(n_local), self._children(math.ceil((n - n_local) / 2))
        )
        return self.repair.do(self.problem, children, random_state=self.rng)

    def _unique_child(self, genes: Genes) -> Candidate | None:
        """The child itself if unseen, else further mutations of it, else a random candidate."""
        pop = Population.new("X", np.array([list(genes)], dtype=object))
        for _ in range(UNIQUE_CHILD_TRIES):
            candidate = self._make_candidate(tuple(pop[0].X), "offspring")
            if candidate is not None:
                return candidate
            pop = self.mutation.do(self.problem, pop, random_state=self.rng)
            pop = self.repair.do(self.problem, pop, random_state=self.rng)
        randoms = self._random_candidates(1)
        return randoms[0] if randoms else None

    def _random_candidates(self, n: int, sampling: Sampling | None = None) -> list[Candidate]:
        """`n` new candidates from `sampling` (uniform by default); a repeat is replaced by an
        unseen uniform draw."""
        out: list[Candidate] = []
        if n <= 0:
            return out
        sampling = sampling or self.sampling
        samples = sampling.do(self.problem, n, random_state=self.rng).get("X")
        for genes in samples:
            candidate = self._make_candidate(tuple(genes), "random")
            if candidate is None:
                candidate = self._unseen_random()
            if candidate is None:
                self.loop.exhausted = True
                break
            out.append(candidate)
        return out

    def _unseen_random(self) -> Candidate | None:
        for _ in range(UNIQUE_RANDOM_TRIES):
            candidate = self._make_candidate(self.space.sample_genes(self.rng), "random")
            if candidate is not None:
                return candidate
        if self.space.cardinality() <= MAX_ENUMERATION:
            for genes in self.space.iter_genes():
                candidate = self._make_candidate(genes, "random")
                if candidate is not None:
                    return candidate
        return None

    def _make_candidate(self, genes: Genes, origin: Origin) -> Candidate | None:
        """A new candidate, or None if its configuration was already proposed."""
        return self.proposals.candidate(genes, origin, self.generation)

    def _maximin_candidates(
        self, n: int, features: UnitFeatures, made: Sequence[Candidate] = ()
    ) -> list[Candidate]:
        """`n` new random candidates, each the farthest (in `features`' unit coordinates) from
        every configuration proposed so far, of `MAXIMIN_DRAWS` uniform draws: a greedy
        maximin design, which covers a plane faster than uniform draws, which cluster (Johnson
        et al., J. Stat. Plan. Inf. 1990). Exploration of `screened` and the GA family's
        immigrants after stagnation, and of its first design's infeasible rows. `made`:
        candidates made but not yet queued, kept away from like the proposed ones."""
        out: list[Candidate] = []
        if n <= 0:
            return out
        taken = self._proposed_features(features, made)
        for _ in range(n):
            draws = self.proposals.new_genes(
                [self.space.sample_genes(self.rng) for _ in range(MAXIMIN_DRAWS)]
            )
            if not draws:
                break
            X = np.nan_to_num(features(draws), nan=-1)
            if len(taken):
                gaps = np.min(np.linalg.norm(X[:, None, :] - taken[None, :, :], axis=2), axis=1)
                best = int(np.argmax(gaps))
            else:  # nothing proposed yet: every draw is as far as any other
                best = 0
            candidate = self._make_candidate(draws[best], "random")
            if candidate is None:
                break
            out.append(candidate)
            taken = np.vstack([taken, X[best]])
        return out

    def _proposed_features(
        self, features: UnitFeatures, made: Sequence[Candidate] = ()
    ) -> np.ndarray:
        """The unit coordinates of every configuration proposed so far, the evaluated ones
        first (in `_records`' order), then the pending and queued ones and `made`."""
        proposed = [(r.genes, r.key) for r in self._records]
        proposed += [(c.genes, c.key) for c in [*self._pending.values(), *self._queue, *made]]
        # Absent parameters (knocked out, inactive) sit at -1, away from every present value.
        return np.nan_to_num(features([g for g, _ in proposed], [k for _, k in proposed]), nan=-1)

    def _children(self, n_matings: int) -> Population:
        """Mutated uniform-crossover children of tournament-selected survivors (2 per mating;
        pymoo's `TournamentSelection`, `UniformCrossover` and our mutation, by their `do`)."""
        if n_matings <= 0:
            return Population.empty()
        pop = Population.new("X", np.array([list(r.genes) for r in self._population], dtype=object))
        pop.set("rank", self._parent_ranks(self._population))
        parents = self.selection.do(
            self.problem, pop, n_matings, 2, to_pop=False, random_state=self.rng
        )
        children = self.crossover.do(self.problem, pop, parents, random_state=self.rng)
        return self.mutation.do(self.problem, children, random_state=self.rng)

    def _local_children(self, n: int) -> Population:
        """Pattern moves (`PatternMove`, by its `do`) of `n` survivors drawn from the best
        `ELITE_SHARE` of the population by the strategy's rank: elitist local search."""
        if n <= 0:
            return Population.empty()
        ranks = self._parent_ranks(self._population)
        elite = np.argsort(ranks, kind="stable")[: max(1, math.ceil(ELITE_SHARE * len(ranks)))]
        starts = self.rng.choice(elite, size=n)
        X = np.array([list(self._population[int(i)].genes) for i in starts], dtype=object)
        return self.local_move.do(self.problem, Population.new("X", X), random_state=self.rng)
