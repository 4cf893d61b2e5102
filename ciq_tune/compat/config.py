"""CompileIQ-compatible configuration: `SearchConfiguration`, worker types, score constants."""

from __future__ import annotations

import enum
from typing import Any
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field
from pydantic import model_validator

INVALID_SCORE = "*"
"""What an objective returns for a failed evaluation (NaN and ±inf count as invalid too)."""

BASELINE_DNA: dict[str, Any] = {}
"""The configuration passed to the objective for the baseline run when `normalize=True`."""

# Refills of a generation whose evaluations mostly failed, with `enable_large_fail_pool`.
LARGE_FAIL_POOL_REFILLS = 3


class WorkerTypes(enum.StrEnum):
    """How evaluations run, mapped onto Ray Tune.

    NATIVE: a local Ray (started with `num_workers` CPUs) running function trainables;
    RAY: a Ray cluster (`ray.init(address=...)`, "auto" or `RAY_ADDRESS` when not given);
    ASYNC: like NATIVE, and `async def` objectives are awaited (`asyncio.run`) in the trial;
    ISOLATED: one fresh process per evaluation, killed after `task_timeout` seconds.
    """

    NATIVE = "native"
    RAY = "ray"
    ASYNC = "async"
    ISOLATED = "isolated"


class MultiScoreComparison(enum.StrEnum):
    """How `SearchResult.get_best_result` ranks evaluations with several objectives.

    PARETO: among the Pareto front, the lowest weighted sum of min–max normalised scores;
    AVERAGE: the lowest weighted mean of min–max normalised scores over every valid row;
    STDDEV: among the Pareto front, the most balanced point (smallest standard deviation of
    its normalised scores), ties broken by AVERAGE.
    """

    PARETO = "pareto"
    AVERAGE = "average"
    STDDEV = "stddev"


class SearchConfiguration(BaseModel):
    """Search settings with CompileIQ's names; `engine_settings()` maps them onto the engine.

    Args:
        problem_type: "min" or "max", for every objective (`Search(objective_modes=...)`
            sets one direction per objective).
        normalize: run the baseline (`BASELINE_DNA`) first and add `norm_score_N` columns
            (score / baseline) to the results; a failed baseline stops the search.
        num_objectives: scores the objective returns (1 to 64).
        generations: generations to run (`Budget.max_generations`).
        pool_size: candidates per generation (6 to 4096; `EngineConfig.pool_size`).
        cull_size: the fittest evaluations kept as parents of the next generation
            (`EngineConfig.survivors`); default `pool_size // 2`, at least 2, below `pool_size`.
        mutate_rate: per-parameter mutation probability (`EngineConfig.mutation_prob`).
        objective_weights: one positive weight per objective (`Objective.weight`), used to
            pick the best point of a Pareto front.
        init_with_true_random_threshold: fraction of the first pool drawn uniformly from the
            whole space (passed to the engine as warm-start points); the rest is drawn within
            the primitives' seed ranges (`seed_low`, `seed_high`), uniformly where there are
            none. Default 0.
        enable_large_fail_pool: refill a generation in which fewer than a quarter of the
            evaluations passed up to 3 times instead of once (`EngineConfig.max_refills`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    problem_type: Literal["min", "max"] = "min"
    normalize: bool = False
    num_objectives: int = Field(default=1, ge=1, le=64)
    generations: int = Field(default=10, ge=1)
    pool_size: int = Field(default=16, ge=6, le=4096)
    cull_size: int | None = Field(default=None, ge=2)
    mutate_rate: float = Field(default=0.1, gt=0, le=1)
    objective_weights: list[float] | None = None
    init_with_true_random_threshold: float = Field(default=0.0, ge=0, le=1)
    enable_large_fail_pool: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> SearchConfiguration:
        if self.cull_size is not None and self.cull_size >= self.pool_size:
            raise ValueError(
                f"`cull_size` must be smaller than `pool_size`, got cull_size={self.cull_size}, "
                f"pool_size={self.pool_size}"
            )
        weights = self.objective_weights
        if weights is not None:
            if len(weights) != self.num_objectives:
                raise ValueError(
                    f"`objective_weights` needs one weight per objective (num_objectives="
                    f"{self.num_objectives}), got objective_weights={weights}"
                )
            if any(not w > 0 for w in weights):
                raise ValueError(f"`objective_weights` must be positive, got {weights}")
        return self

    @property
    def survivors(self) -> int:
        """Evaluations kept as parents: `cull_size`, or `pool_size // 2` when unset."""
        return self.cull_size if self.cull_size is not None else max(self.pool_size // 2, 2)

    @property
    def weights(self) -> list[float]:
        """One weight per objective (1.0 each unless `objective_weights` is given)."""
        return list(self.objective_weights or [1.0] * self.num_objectives)

    def engine_settings(self) -> dict[str, Any]:
        """The `EngineConfig` fields this configuration sets."""
        settings: dict[str, Any] = {
            "pool_size": self.pool_size,
            "survivors": self.survivors,
            "mutation_prob": self.mutate_rate,
        }
        if self.enable_large_fail_pool:
            settings["max_refills"] = LARGE_FAIL_POOL_REFILLS
        return settings
