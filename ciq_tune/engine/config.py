"""Typed, frozen settings shared by the engines: the budget and the evolutionary settings."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field
from pydantic import model_validator

from ciq_tune.engine.operators.sampling import InitialSampling


class Budget(BaseModel):
    """When the engine stops proposing candidates. Every limit is optional; the first one
    reached ends the search.

    Args:
        max_generations: generations (pools of `pool_size` evaluations) to run.
        max_evaluations: unique evaluations, failed ones included.
        max_time_s: wall-clock seconds since the engine started (kept across restore).
        stagnation_generations: stop after this many generations without improvement.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_generations: int | None = Field(default=None, ge=1)
    max_evaluations: int | None = Field(default=None, ge=1)
    max_time_s: float | None = Field(default=None, gt=0)
    stagnation_generations: int | None = Field(default=None, ge=1)


class EngineConfig(BaseModel):
    """Settings shared by the evolutionary strategies; each strategy has its own subclass and
    `*_DEFAULTS`.

    Args:
        pool_size: candidates per generation (CompileIQ's `pool_size`).
        survivors: population kept between generations (default: `pool_size`).
        mutation_prob: per-gene mutation probability (default: max(1/n_params, 0.1)).
        crossover_prob: probability that a pair of parents is recombined.
        initial_sampling: how the first generation (after any warm start) is drawn: a Latin
            hypercube over the parameters (`LatinHypercubeSampling`: every range covered
            evenly) or uniform random draws.
        local_share: share of children that are pattern moves of one tournament-selected
            parent (coarse to fine steps of ordered values, `PatternMove`) instead of
            recombined children.
        steady_state: propose a new candidate whenever a worker is free instead of waiting for
            the slowest evaluation of the generation.
        min_pass_fraction: a generation in which fewer candidates than this fraction of
            `pool_size` pass is refilled with new candidates (up to `max_refills` times).
        max_refills: refills allowed per generation.
        transfer_points: best configurations of an earlier search (`transfer_from`) evaluated
            in the first generation.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    pool_size: int = Field(default=16, ge=2)
    survivors: int | None = Field(default=None, ge=2)
    mutation_prob: float | None = Field(default=None, gt=0, le=1)
    crossover_prob: float = Field(default=0.9, ge=0, le=1)
    initial_sampling: InitialSampling = "latin_hypercube"
    local_share: float = Field(default=0.5, ge=0, le=1)
    steady_state: bool = False
    min_pass_fraction: float = Field(default=0.25, ge=0, le=1)
    max_refills: int = Field(default=1, ge=0)
    transfer_points: int = Field(default=4, ge=0)

    @model_validator(mode="after")
    def _survivors_fit(self) -> EngineConfig:
        if self.survivors is not None and self.survivors > 4 * self.pool_size:
            raise ValueError(
                f"`survivors` must be at most 4 x pool_size, got survivors={self.survivors}, "
                f"pool_size={self.pool_size}"
            )
        return self


# The GA family's breeding, chosen on battery seeds 100-199 (budgets 25/50) and 100-139
# (multi_basin, 100-800), checked on seeds 10-29; `progress_tolerance` and
# `compound_immigrants` chosen on seeds 100-199 (25-200; multi_basin and conditional 25-400),
# checked on seeds 10-49; `first_design_size` and `local_after` on seeds 100-199 (25-200),
# checked on seeds 10-49: after a first design of 16, pattern moves from the second bred
# generation (cells behind random search per block of 20 seeds, 25-200: ga 3.0 with 2, 2.6
# with 1; nsga2 at 25/50: 5.4 with 0, 3.8 with 1, 4.2 with 2).
# `restart_share`, `restart_sigma` and `immigrant_share` 0.75 (against 0.5) on seeds 100-199
# (multi_basin entered by 200 evaluations; every problem 25-200), checked on seeds 10-49 at
# 25-400 (docs/benchmarks.md, "Synthetic battery").
# `progress_tolerance` 0.05 of the values' spread (against 0.01 of the value) with the
# neighbour poll of short parameters only, on seeds 100-199 and 200-299 (25-200): seeds at the
# optimum within 200, of 1500 per set, ga 913 -> 1225 and 905 -> 1221, nsga2 742 -> 946 and
# 740 -> 969 (docs/benchmarks.md, "Synthetic battery").
# `preselection_draws` 1 (against 0 and 0.5) on seeds 100-199 (12 wide problems, 25-200),
# checked on seeds 1000-1499 at 25 and 50 (docs/benchmarks.md, "Synthetic battery").
# The measurements: docs/benchmarks.md, "Synthetic battery".
GENETIC_DEFAULTS: dict[str, Any] = {
    "initial_sampling": "sobol",
    "preselection": 4,
    "preselected_generations": 4,
    "preselection_draws": 1.0,
    "immigrate_after": 2,
    "immigrant_share": 0.75,
    "local_after": 1,
    "progress_tolerance": 0.05,
    "compound_immigrants": True,
    "poll_neighbours": True,
    "first_design_size": 16,
    "restart_share": 1.0,
    "restart_sigma": 8.0,
    "polish_share": 0.5,
    "polish_generations": 1,
}


class GeneticConfig(EngineConfig):
    """Settings of the GA family (`ga`, `nsga2`, `nsga3`) on top of `EngineConfig`; defaults
    in `GENETIC_DEFAULTS` (a scrambled Sobol' first generation, `engine/genetic.py`).

    Args:
        preselection: children bred per child evaluated; the kept ones are picked by a
            Gaussian process's expected improvement times their chance to succeed (1: no
            pre-selection, every bred child is evaluated).
        preselected_generations: the bred generations that are pre-selected (the first
            ones, None for all). Later ones are bred as they come: all pre-selected, more
            seeds reach the optimum but more sit behind random search (battery;
            docs/benchmarks.md, "Synthetic battery").
        preselection_draws: uniform random configurations added to a pre-selected pool, per
            bred child in it, in a space with a wide parameter (0: bred children only).
        immigrate_after: generations without a new best after which immigrants join each
            generation (None: never).
        immigrant_share: share of each stagnating generation that is immigrants: random
            configurations far from everything proposed.
        compound_immigrants: each further generation without progress breeds only
            `1 - immigrant_share` of the share bred in the one before (0.5, 0.75, 0.875, …
            immigrants for a share of 0.5); False: `immigrant_share` throughout.
        progress_tolerance: an evaluation counts as progress (for `immigrate_after`) when it
            beats every earlier one by more than this share of the spread of the successful
            values before it (median - best), in some objective (0: any new best or
            non-dominated point).
        local_after: bred generations that are recombined only, before pattern moves of the
            elite (`local_share`) join (0: from the first bred generation).
        poll_neighbours: a generation that gets immigrants (`immigrate_after`) first
            proposes the never-proposed configurations one parameter away from the best.
        first_design_size: size of the first generation when smaller than `pool_size`
            (and the budget is not in generations): 16 points of a scrambled Sobol' sequence
            are a net, evenly spread over every pair of parameters; 24 are not, and breeding
            from 16 evaluations starts earlier.
        restart_share: share of a stagnating generation (after the neighbour poll) spent first
            on local descents from random or immigrant configurations lower than every
            evaluation within MLSL's critical distance (`engine/multistart.py`); the rest is
            immigrants and children as before (0: no descents).
        restart_sigma: MLSL's factor of that critical distance (larger: fewer descents).
        polish_share: share of each of the first `polish_generations` bred generations, and
            of a stagnating one (`immigrate_after`) once every neighbour of the best has been
            proposed, that polls around the best by compass search (`screened`'s polish), in
            a space with a wide parameter (0: bred as before). A poll at the current steps has
            about two points per parameter, so shares above about 4 / pool_size give the same
            proposals.
        polish_generations: the first bred generations that start with the polish (None:
            all; a stagnating one polishes as said above).
    """

    initial_sampling: InitialSampling = GENETIC_DEFAULTS["initial_sampling"]
    preselection: int = Field(default=GENETIC_DEFAULTS["preselection"], ge=1)
    preselected_generations: int | None = Field(
        default=GENETIC_DEFAULTS["preselected_generations"], ge=1
    )
    preselection_draws: float = Field(default=GENETIC_DEFAULTS["preselection_draws"], ge=0)
    immigrate_after: int | None = Field(default=GENETIC_DEFAULTS["immigrate_after"], ge=1)
    immigrant_share: float = Field(default=GENETIC_DEFAULTS["immigrant_share"], ge=0, le=1)
    local_after: int = Field(default=GENETIC_DEFAULTS["local_after"], ge=0)
    compound_immigrants: bool = GENETIC_DEFAULTS["compound_immigrants"]
    progress_tolerance: float = Field(default=GENETIC_DEFAULTS["progress_tolerance"], ge=0)
    poll_neighbours: bool = GENETIC_DEFAULTS["poll_neighbours"]
    first_design_size: int = Field(default=GENETIC_DEFAULTS["first_design_size"], ge=1)
    restart_share: float = Field(default=GENETIC_DEFAULTS["restart_share"], ge=0, le=1)
    restart_sigma: float = Field(default=GENETIC_DEFAULTS["restart_sigma"], gt=0)
    polish_share: float = Field(default=GENETIC_DEFAULTS["polish_share"], ge=0, le=1)
    polish_generations: int | None = Field(default=GENETIC_DEFAULTS["polish_generations"], ge=1)
