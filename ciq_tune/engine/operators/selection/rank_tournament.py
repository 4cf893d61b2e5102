"""Binary tournament on a rank stored in the population (pymoo `TournamentSelection`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pymoo.core.population import Population
from pymoo.operators.selection.tournament import TournamentSelection


def better_rank(pop: Population, P: np.ndarray, **kwargs: Any) -> np.ndarray:
    """Winner of each tournament row of `P`: the lower "rank" (ties go to the first entrant,
    which pymoo's random permutations already placed at random)."""
    ranks = pop.get("rank").astype(float)
    winners = np.empty(len(P), dtype=int)
    for i, row in enumerate(P):
        winners[i] = row[int(np.argmin(ranks[row]))]
    return winners


def rank_tournament() -> TournamentSelection:
    """pymoo's binary tournament comparing the "rank" attribute each strategy assigns
    (fitness order for GA, non-domination rank then crowding for NSGA-II; Deb et al. 2002,
    crowded-comparison operator)."""
    return TournamentSelection(func_comp=better_rank, pressure=2)
