"""The ask/tell engine loop shared by every strategy.

A strategy sets `min_objectives`/`max_objectives` and fills in hooks that sit together at the
bottom of `Engine`:

- `_survive(records, n)`: which evaluated candidates form the next population (best first);
- `_parent_ranks(population)`: a rank per survivor for tournament selection (lower is better);
- `_strategy_state()` / `_load_strategy_state(state)`: extra state to save and restore;

and may override how candidates are made (`Variation`, `engine/variation.py`): `_offspring(n)`,
new candidates bred from the population (default: binary tournament, uniform crossover,
per-parameter mutation, constraint repair, duplicate elimination), `_bred`,
`_random_candidates`.

The base owns everything else: the first generation (warm start + a Latin hypercube, or
uniform draws), variation (crossover, mutation, constraint repair), failures, refilling
generations with too few passing candidates, steady-state mode and results (pymoo
`core/algorithm.py`: ask/tell with hooks in one place). Where the loop stands and when the
budget stops it is `LoopState` (`engine/loop.py`); saving and restoring the state is its base
class `Resumable` (`engine/state.py`); making candidates (the first design, offspring, random
and maximin draws) its base class `Variation` (`engine/variation.py`); what was proposed, and
whether a configuration is new, `ProposalArchive` (`engine/proposals.py`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import ClassVar

import numpy as np
from pymoo.core.population import Population
from pymoo.operators.crossover.ux import UniformCrossover
from threadpoolctl import ThreadpoolController

from ciq_tune.engine.config import Budget
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.loop import LoopState
from ciq_tune.engine.operators import FeasibilityRepair
from ciq_tune.engine.operators import ParameterMutation
from ciq_tune.engine.operators import SpaceProblem
from ciq_tune.engine.operators import SpaceSampling
from ciq_tune.engine.operators import rank_tournament
from ciq_tune.engine.operators.mutation.pattern_move import PatternMove
from ciq_tune.engine.operators.sampling import initial_sampling
from ciq_tune.engine.proposals import Candidate
from ciq_tune.engine.proposals import ProposalArchive
from ciq_tune.engine.shape_descent import ShapeDescent
from ciq_tune.engine.state import Resumable
from ciq_tune.engine.transfer import transfer_genes
from ciq_tune.engine.variation import Variation
from ciq_tune.errors import EngineError
from ciq_tune.errors import SpaceError
from ciq_tune.results import OK
from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.results import non_dominated
from ciq_tune.results import parse_values
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes

# A strategy's linear algebra runs on one thread. Its matrices are small (a side per
# evaluation), and where the node's cores compile kernels a BLAS pool of a thread per core waits
# for them: the default strategy's first 100 suggestions on the persistent matmul's listed space
# took 32 s of engine time with two threads on two loaded cores, 0.8 s with one.
_BLAS = ThreadpoolController()

DEFAULT_GENERATIONS = 10


class Engine(Resumable, Variation):
    """Ask/tell search over a `SearchSpace` (see the module docstring for the hooks).

    Args:
        space: the search space (a `SearchSpace` or a spec dict).
        objectives: what to optimise, each with its own direction.
        config: the strategy's settings (its `config_model`); defaults if None.
        budget: when to stop; `Budget(max_generations=10)` if None.
        seed: seed of the engine's one random generator (same seed → same candidates).
        initial_points: configurations evaluated in the first generation (warm start);
            missing parameters take their defaults.
        baseline: a configuration evaluated first and marked as the baseline, or "default"
            for every parameter's default (knocked-out options not passed).
        transfer_from: an earlier search of the same kernel (another GPU or shape): its
            `transfer_points` best configurations that fit this space are evaluated in the
            first generation, after `initial_points` (`engine/transfer.py`).

    Attributes:
        shape_descent: in a search over a matrix of shapes, a per-shape coordinate descent
            that proposes a share of the candidates (`engine/shape_descent.py`); None (the
            default) for none. Kept in the engine's state.
    """

    min_objectives: ClassVar[int] = 1
    max_objectives: ClassVar[int | None] = None

    def __init__(
        self,
        space: SearchSpace | Mapping[str, Any],
        objectives: Sequence[Objective | str],
        *,
        config: EngineConfig | Mapping[str, Any] | None = None,
        budget: Budget | None = None,
        seed: int | None = None,
        initial_points: Sequence[Any] = (),
        baseline: Any = None,
        transfer_from: SearchResults | None = None,
    ) -> None:
        self.space = space if isinstance(space, SearchSpace) else SearchSpace(space)
        self.objectives = _objectives(objectives)
        self._validate_objectives()
        if isinstance(config, Mapping) or config is None:
            config = self.config_model(**dict(config or {}))
        if not isinstance(config, self.config_model):
            raise EngineError(
                f"`config` must be a {self.config_model.__name__} for strategy {self.name!r}, "
                f"got {type(config).__name__}"
            )
        self.config = config
        self.budget = budget if budget is not None else Budget(max_generations=DEFAULT_GENERATIONS)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.problem = SpaceProblem(self.space, n_obj=len(self.objectives))
        gene_prob = config.mutation_prob or max(1.0 / len(self.space), 0.1)
        self.mutation = ParameterMutation(gene_prob)
        self.crossover = UniformCrossover(prob=config.crossover_prob)
        self.local_move = PatternMove()
        self.repair = FeasibilityRepair(self.mutation)
        self.sampling = SpaceSampling()
        self.first_sampling = initial_sampling(config.initial_sampling)
        self.selection = rank_tournament()
        # Every configuration proposed so far (queued, out or told): duplicates are checked
        # against it, not only against the population.
        self.proposals = ProposalArchive(self.space)

        self.loop = LoopState()
        self._queue: list[Candidate] = []
        self._pending: dict[int, Candidate] = {}
        self._records: list[EvaluationRecord] = []
        self._population: list[EvaluationRecord] = []
        self._front: list[np.ndarray] = []
        self._warm_start = self._encode_warm_start(initial_points, baseline, transfer_from)
        self.shape_descent: ShapeDescent | None = None

    # -- public API ----------------------------------------------------------------------------
    def ask(self) -> Candidate | None:
        """The next candidate to evaluate, or None when the engine must wait for results (only
        while candidates are out) or the budget is spent (then `finished` once all are told).

        Invariant: when `finished` is False and no candidate is out, `ask()` returns one."""
        if self.stop_reason is not None:
            return None
        candidate = self._descent_move()
        if candidate is None:
            if not self._queue and not self.loop.exhausted:
                self._refill_queue()
            if not self._queue or self.stop_reason is not None:
                return None
            candidate = self._queue.pop(0)
        self._pending[candidate.id] = candidate
        return candidate

    def tell(
        self,
        candidate_id: int,
        values: float | Sequence[float] | Mapping[str, float] | None,
        *,
        status: str = OK,
        info: Mapping[str, Any] | None = None,
    ) -> EvaluationRecord:
        """Record the outcome of a candidate.

        Args:
            candidate_id: the `Candidate.id` handed out by `ask`.
            values: objective values (a number for one objective, a sequence in objective
                order, or a mapping by objective name); None for a failure.
            status: "ok", or a failure reason ("error", "timeout", "compile_error", …).
                Missing, NaN or infinite values turn "ok" into "invalid_result".
            info: extra data kept with the record (logs, statistics).
        """
        candidate = self._pending.pop(candidate_id, None)
        if candidate is None:
            told = any(r.candidate_id == candidate_id for r in self._records)
            raise EngineError(
                f"candidate {candidate_id} was "
                + ("already told" if told else "never handed out by ask()")
            )
        parsed, status = parse_values(self.objectives, values, status)
        record = EvaluationRecord(
            candidate_id=candidate.id,
            generation=candidate.generation,
            config=candidate.config,
            genes=candidate.genes,
            key=candidate.key,
            origin=candidate.origin,
            status=status,
            values=parsed,
            elapsed_s=self.elapsed_s,
            info=dict(info or {}),
        )
        if record.ok and self._is_improvement(record):
            self.loop.improved = True
        self._records.append(record)
        if record.ok and candidate.generation == self.generation:
            self.loop.generation_ok += 1
        if self.config.steady_state:
            self._tell_steady(record)
        self._advance()
        return record

    def _descent_move(self) -> Candidate | None:
        """A per-shape descent's move when it has one now (after the first generation)."""
        if self.shape_descent is None or not self.loop.started:
            return None
        genes = self.shape_descent.propose(
            self.space, self._records, self.proposals.new_genes, self.rng
        )
        return None if genes is None else self._make_candidate(genes, "descent")

    @property
    def finished(self) -> bool:
        """True once the budget is spent (or the space exhausted) and nothing is out. A pure
        query: the state changes in `tell` (which closes a completed generation) and `ask`."""
        return self.stop_reason is not None and not self._pending

    def _advance(self) -> None:
        """With nothing out and nothing queued, close the completed generation and breed the
        next one now (or note that the space is exhausted), so that `finished` can be read
        without changing anything and `ask()` has a candidate whenever it is False."""
        if self.loop.started and not self._pending and not self._queue and not self.stop_reason:
            self._refill_queue()
            if not self._queue and self.stop_reason is None:  # nothing new could be made
                self.loop.exhausted = True

    @property
    def stop_reason(self) -> str | None:
        """Why the engine proposes no more candidates, or None while it does."""
        return self.loop.stop_reason(
            self.budget,
            asked=len(self._records) + len(self._pending),
            queued=len(self._queue),
            steady_state=self.config.steady_state,
            pool_size=self.config.pool_size,
        )

    @property
    def generation(self) -> int:
        return self.loop.generation

    @property
    def elapsed_s(self) -> float:
        return self.loop.elapsed_s

    @property
    def pending(self) -> list[Candidate]:
        return list(self._pending.values())

    def pending_config(self, candidate_id: int) -> Any:
        """Configuration of a candidate that is out for evaluation."""
        if candidate_id not in self._pending:
            raise EngineError(f"candidate {candidate_id} is not out for evaluation")
        return self._pending[candidate_id].config

    @property
    def records(self) -> list[EvaluationRecord]:
        return list(self._records)

    def result(self) -> SearchResults:
        """Every evaluation so far, with the best configuration and the Pareto front."""
        return SearchResults(self.objectives, self._records)

    # -- the loop ------------------------------------------------------------------------------
    def _refill_queue(self) -> None:
        with _BLAS.limit(limits=1, user_api="blas"):
            self._fill_queue()

    def _fill_queue(self) -> None:
        if not self.loop.started:
            self.loop.started = True
            self._start_generation(self._first_generation())
        elif self.config.steady_state:
            if len(self._population) >= 2:
                self._queue.extend(self._offspring(1))
            else:
                self._queue.extend(self._random_candidates(1))
        elif not self._pending:
            self._end_generation()

    def _end_generation(self) -> None:
        """All candidates of the generation are told: refill it or move to the next one."""
        enough = math.ceil(self.config.min_pass_fraction * self.config.pool_size)
        if self.loop.generation_ok < enough and self.loop.refills < self.config.max_refills:
            self.loop.refills += 1
            missing = self.config.pool_size - self.loop.generation_ok
            self._queue.extend(self._variation_or_random(missing))
            if self._queue:
                return
        current = [r for r in self._records if r.generation == self.generation and r.ok]
        self._population = self._survive(self._population + current, self._n_survivors())
        self.loop.close_generation()
        if self.stop_reason is None:
            self._start_generation(self._variation_or_random(self.config.pool_size))

    def _tell_steady(self, record: EvaluationRecord) -> None:
        if record.ok:
            self._population = self._survive([*self._population, record], self._n_survivors())
        if len(self._records) % self.config.pool_size == 0:
            self.loop.close_generation()

    def _start_generation(self, candidates: list[Candidate]) -> None:
        self.loop.generation_created = len(candidates)
        self._queue.extend(candidates)
        if not candidates:
            self.loop.exhausted = True

    def _first_generation(self) -> list[Candidate]:
        return self._first_design(self.config.pool_size, self.first_sampling)

    def _n_survivors(self) -> int:
        return self.config.survivors or self.config.pool_size

    # -- values ---------------------------------------------------------------------------------
    def _is_improvement(self, record: EvaluationRecord) -> bool:
        """A new best value (one objective) or a point that no earlier one dominates (several);
        keeps the non-dominated front of minimised values up to date."""
        new = record.minimised(self.objectives)
        if any(np.all(old <= new) for old in self._front):
            return False
        F = np.array([*self._front, new])
        self._front = list(F[non_dominated(F)])  # the one Pareto front (results.py)
        return True

    def _encode_warm_start(
        self, initial_points: Sequence[Any], baseline: Any, transfer_from: SearchResults | None
    ) -> list[tuple[Genes, str]]:
        points: list[tuple[Genes, str]] = []
        if baseline is not None:
            genes = (
                self.space.default_genes()
                if isinstance(baseline, str) and baseline == "default"
                else self._encode_point(baseline, "baseline")
            )
            points.append((genes, "baseline"))
        for point in initial_points:
            points.append((self._encode_point(point, "initial_points"), "initial"))
        if transfer_from is not None:
            given = [genes for genes, _ in points]
            limit = self.config.transfer_points
            points += [
                (g, "transfer") for g in transfer_genes(transfer_from, self.space, limit, given)
            ]
        return points

    def _encode_point(self, point: Any, what: str) -> Genes:
        try:
            genes = self.space.encode(point, fill_defaults=True)
        except SpaceError as exc:
            raise SpaceError(f"`{what}`: {exc}") from exc
        if not self.space.is_feasible(genes):
            raise SpaceError(f"`{what}`: {point!r} breaks the space's constraints")
        return genes

    def as_population(self, records: Sequence[EvaluationRecord]) -> Population:
        """A pymoo population of successful records (F minimised, `index` into `records`)."""
        F = np.array([r.minimised(self.objectives) for r in records], dtype=float)
        pop = Population.new("X", np.array([list(r.genes) for r in records], dtype=object))
        pop.set("F", F.reshape(len(records), len(self.objectives)))
        pop.set("index", np.arange(len(records)))
        return pop

    # -- strategy hooks ------------------------------------------------------------------------
    def _validate_objectives(self) -> None:
        """Raise `EngineError` when the strategy cannot handle `self.objectives`."""
        n = len(self.objectives)
        names = [o.name for o in self.objectives]
        if n < self.min_objectives:
            raise EngineError(
                f"strategy {self.name!r} needs at least {self.min_objectives} objectives, got "
                f"{names}; use 'ga' for one"
            )
        if self.max_objectives is not None and n > self.max_objectives:
            raise EngineError(
                f"strategy {self.name!r} optimises at most {self.max_objectives} objective(s), "
                f"got {n} ({names}); use 'nsga2' or 'nsga3'"
            )

    def _survive(self, records: list[EvaluationRecord], n: int) -> list[EvaluationRecord]:
        """The `n` records that survive into the next population, best first."""
        raise EngineError(f"strategy {self.name!r} does not implement survival")

    def _parent_ranks(self, population: list[EvaluationRecord]) -> np.ndarray:
        """A rank per survivor for tournament selection (lower is better); by default the
        survivors' order."""
        return np.arange(len(population))

    def _strategy_state(self) -> dict[str, Any]:
        """Extra JSON-safe state of the strategy (e.g. NSGA-III's ideal point)."""
        return {}

    def _load_strategy_state(self, state: Mapping[str, Any]) -> None:
        """Inverse of `_strategy_state`."""


def _objectives(objectives: Sequence[Objective | str]) -> list[Objective]:
    if isinstance(objectives, (str, Objective)):
        objectives = [objectives]
    parsed = [o if isinstance(o, Objective) else Objective(name=o) for o in objectives]
    if not parsed:
        raise EngineError("give at least one objective, e.g. objectives=[Objective('time_ms')]")
    names = [o.name for o in parsed]
    if len(set(names)) != len(names):
        raise EngineError(f"objective names must be unique, got {names}")
    return parsed
