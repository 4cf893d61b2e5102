"""Ask/tell search engines over a `SearchSpace`, registered by name."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from ciq_tune.engine.base import Engine
from ciq_tune.engine.config import Budget
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.ga import GA
from ciq_tune.engine.nsga2 import NSGA2
from ciq_tune.engine.nsga3 import NSGA3
from ciq_tune.engine.proposals import Candidate
from ciq_tune.engine.random import RandomSearch
from ciq_tune.engine.screened import ScreenedGA
from ciq_tune.errors import EngineError
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.space import SearchSpace

STRATEGIES: dict[str, type[Engine]] = {
    "ga": GA,
    "nsga2": NSGA2,
    "nsga3": NSGA3,
    "random": RandomSearch,
    "screened": ScreenedGA,
}

__all__ = [
    "STRATEGIES",
    "Budget",
    "Candidate",
    "Engine",
    "EngineConfig",
    "Objective",
    "SearchResults",
    "create_engine",
    "strategy_for",
]


def strategy_for(n_objectives: int) -> str:
    """The default strategy: the screened GA for one objective (fewest evaluations to 95 % of
    the optimum on the recorded GEMM and convolution spaces, docs/benchmarks.md), NSGA-II for
    two or three, NSGA-III beyond."""
    if n_objectives == 1:
        return "screened"
    return "nsga2" if n_objectives <= 3 else "nsga3"


def create_engine(
    strategy: str,
    space: SearchSpace | Mapping[str, Any],
    objectives: Sequence[Objective | str] | Objective | str,
    **kwargs: Any,
) -> Engine:
    """An engine by strategy name ("auto" picks by the number of objectives).

    Keyword arguments go to `Engine` (config, budget, seed, initial_points, baseline).
    """
    if isinstance(objectives, (str, Objective)):
        objectives = [objectives]
    name = strategy_for(len(objectives)) if strategy == "auto" else strategy
    if name not in STRATEGIES:
        raise EngineError(
            f"unknown strategy {strategy!r}; choose one of {['auto', *sorted(STRATEGIES)]}"
        )
    return STRATEGIES[name](space, objectives, **kwargs)
