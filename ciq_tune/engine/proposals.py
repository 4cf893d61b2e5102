"""What the engine has proposed: the `Candidate` handed out for evaluation and the archive of
every configuration proposed so far (queued, out or told), against which new ones are checked
for duplicates (pymoo's genetic algorithm checks offspring against its archive the same way:
`DuplicateElimination.do(offspring, archive)`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import asdict
from dataclasses import dataclass
from typing import Any
from typing import Literal

import numpy as np
from pymoo.core.individual import Individual
from pymoo.core.population import Population

from ciq_tune.engine.operators import duplicate_elimination
from ciq_tune.engine.operators.duplicates.config_duplicates import ConfigHashDuplicateElimination
from ciq_tune.engine.operators.duplicates.config_duplicates import config_key
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes

Origin = Literal["baseline", "initial", "transfer", "random", "offspring", "descent"]


@dataclass(frozen=True)
class Candidate:
    """A configuration handed out for evaluation."""

    id: int
    config: Any
    genes: Genes
    generation: int
    key: str
    origin: Origin

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["genes"] = list(self.genes)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Candidate:
        return cls(**{**data, "genes": tuple(data["genes"])})


class ProposalArchive:
    """Every configuration proposed so far; hands out candidates only for unseen ones.

    Args:
        space: the search space (its duplicate elimination: exact keys for discrete spaces,
            epsilon-close unit coordinates when a parameter is continuous).
    """

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self.duplicates = duplicate_elimination(space)
        self.next_id = 0
        self._individuals: list[Individual] = []
        # The archive's keys where duplicates are exact keys: the same test as the pymoo
        # hashing elimination's, without rebuilding its set of the whole archive per call.
        self._keys: set[str] | None = (
            set() if isinstance(self.duplicates, ConfigHashDuplicateElimination) else None
        )

    def candidate(self, genes: Genes, origin: Origin, generation: int) -> Candidate | None:
        """A new candidate (archived, with the next id), or None if its configuration was
        already proposed."""
        individual = _individual(genes)
        if self._keys is not None:
            key = config_key(self.space, individual)
            if key in self._keys:
                return None
            self._keys.add(key)
        elif len(self.duplicates.do(Population.create(individual), self.population())) == 0:
            return None
        self._individuals.append(individual)
        candidate = Candidate(
            id=self.next_id,
            config=self.space.decode(genes),
            genes=tuple(_plain(g) for g in genes),
            generation=generation,
            key=config_key(self.space, individual),
            origin=origin,
        )
        self.next_id += 1
        return candidate

    def new_genes(self, rows: Sequence[Genes]) -> list[Genes]:
        """The feasible rows that are neither duplicates of each other nor of the archive
        (nothing is archived: the caller proposes some of them through `candidate`)."""
        feasible = [_individual(g) for g in rows if self.space.is_feasible(tuple(g))]
        if not feasible:
            return []
        if self._keys is not None:  # the first row of each key, unless the archive has it
            out: list[Genes] = []
            seen: set[str] = set()
            for individual in feasible:
                key = config_key(self.space, individual)
                if key not in seen and key not in self._keys:
                    out.append(tuple(individual.X))
                seen.add(key)
            return out
        new = self.duplicates.do(Population.create(*feasible), self.population())
        return [tuple(individual.X) for individual in new]

    def population(self) -> Population:
        """The archive as a pymoo population."""
        if not self._individuals:
            return Population.empty()
        return Population.create(*self._individuals)

    def restore(self, proposed: Sequence[tuple[Genes, str]], next_id: int) -> None:
        """Refill the archive from saved (genes, key) pairs."""
        self._individuals = [_individual(genes, key) for genes, key in proposed]
        if self._keys is not None:
            self._keys = {config_key(self.space, individual) for individual in self._individuals}
        self.next_id = next_id


def _plain(gene: Any) -> Any:
    """numpy scalars → Python scalars, so that state and records are JSON-safe."""
    return gene.item() if isinstance(gene, np.generic) else gene


def _individual(genes: Genes, key: str | None = None) -> Individual:
    individual = Individual(X=np.array(list(genes), dtype=object))
    if key is not None:
        individual.set("key", key)
    return individual
