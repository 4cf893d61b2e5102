"""Ask/tell search engines over a `SearchSpace`, registered by name."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ciq_tune.engine.base import Engine
from ciq_tune.engine.config import Budget
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.exhaustive import Exhaustive
from ciq_tune.engine.exhaustive import ExhaustiveConfig
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
    "exhaustive": Exhaustive,
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
    "budget_covers_space",
    "create_engine",
    "strategy_for",
]

# `auto` counts a space's feasible configurations only when it has at most this many gene
# combinations and this many per evaluation of the budget: the count reads every combination
# (about 3 µs each), so it costs at most a few ms per evaluation, against about a second to
# compile and time one kernel.
AUTO_LIST_LIMIT = 1_000_000
AUTO_ROWS_PER_EVALUATION = 1_000


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
    """An engine by strategy name; "auto" lists the space ("exhaustive") when the budget
    covers every feasible configuration (`budget_covers_space`), else picks by the number of
    objectives (`strategy_for`).

    Keyword arguments go to `Engine` (config, budget, seed, initial_points, baseline).
    """
    if isinstance(objectives, (str, Objective)):
        objectives = [objectives]
    if strategy == "auto":
        space = space if isinstance(space, SearchSpace) else SearchSpace(space)
        covered = budget_covers_space(space, kwargs.get("budget"), kwargs.get("config"))
        name = "exhaustive" if covered else strategy_for(len(objectives))
    else:
        name = strategy
    if name not in STRATEGIES:
        raise EngineError(
            f"unknown strategy {strategy!r}; choose one of {['auto', *sorted(STRATEGIES)]}"
        )
    return STRATEGIES[name](space, objectives, **kwargs)


def budget_covers_space(
    space: SearchSpace, budget: Budget | None, config: EngineConfig | Mapping[str, Any] | None
) -> bool:
    """Whether `budget` lets "exhaustive" evaluate every feasible configuration of `space`:
    the space has no continuous parameter, `max_evaluations` is set and no
    `stagnation_generations` (which could stop a listing part way), and the feasible
    configurations are at most `max_evaluations` and, when set, `max_generations` x
    `pool_size`. A search strategy would then spend the budget on about as many
    configurations and might still miss the best. `max_time_s` is not considered: a time
    limit can still stop a listing part way, at a prefix of its order.

    False, without counting, when `config` does not fit `ExhaustiveConfig` (another
    strategy's settings) or the space has more than `AUTO_LIST_LIMIT` gene combinations or
    `AUTO_ROWS_PER_EVALUATION` per evaluation allowed.
    """
    if (
        budget is None
        or budget.max_evaluations is None
        or budget.stagnation_generations is not None
    ):
        return False
    if isinstance(config, ExhaustiveConfig) or config is None:
        settings = config or ExhaustiveConfig()
    elif isinstance(config, Mapping):
        try:
            settings = ExhaustiveConfig(**config)
        except ValidationError:
            return False
    else:
        return False
    if space.has_continuous:
        return False
    allowed = budget.max_evaluations
    if budget.max_generations is not None:
        allowed = min(allowed, budget.max_generations * settings.pool_size)
    rows = space.cardinality()
    if rows > settings.max_combinations:
        return False
    if rows <= allowed:
        return True
    if rows > min(AUTO_LIST_LIMIT, AUTO_ROWS_PER_EVALUATION * allowed):
        return False
    listed = space.enumerate_genes(settings.max_combinations)
    return sum(1 for _ in itertools.islice(listed, allowed + 1)) <= allowed
