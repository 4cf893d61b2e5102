"""What a kernel search proposes: its space, objective, budget, seed, first points and strategy.

One object for the arguments that the local engine (`searchers.local_search.kernel_engine`) and
the Ray Tune searcher (`searchers.kernel_search.kernel_tuner`) share, so that a run builds them
once, whichever path it takes. Its fields are `CompileIQSearcher`'s keyword arguments of the
same names.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ciq_tune.results import SearchResults
from ciq_tune.space import SearchSpace
from objectives.description import KernelDescription


@dataclass(frozen=True)
class SearchPlan:
    """A search of `max_evaluations` evaluations of `strategy` (`ciq_tune.engine.create_engine`)
    over `space`, `metric` searched in direction `mode`; `points_to_evaluate` are evaluated first.
    `transfer_from`: an earlier search of the kernel to start from; `time_budget_s`: stop after
    this many seconds."""

    space: SearchSpace
    metric: str
    mode: str
    max_evaluations: int
    seed: int
    points_to_evaluate: Sequence[Mapping[str, Any]] = ()
    strategy: str = "auto"
    transfer_from: SearchResults | None = None
    time_budget_s: float | None = None

    @classmethod
    def of(
        cls,
        desc: KernelDescription,
        space: SearchSpace,
        points_to_evaluate: Sequence[Mapping[str, Any]],
        *,
        max_evaluations: int,
        seed: int,
        metric: str | None = None,
        strategy: str = "auto",
        transfer_from: SearchResults | None = None,
        time_budget_s: float | None = None,
    ) -> SearchPlan:
        """The plan of a search of `desc`: its metric (or `metric`, e.g. a matrix's score) in
        its direction."""
        return cls(
            space,
            metric or desc.metric,
            desc.mode,
            max_evaluations,
            seed,
            points_to_evaluate,
            strategy,
            transfer_from,
            time_budget_s,
        )
