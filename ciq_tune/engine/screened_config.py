"""Settings of the screened search (`ScreenedGAConfig`) and their one source of defaults
(`SCREENED_DEFAULTS`); the strategy is `engine/screened.py`."""

from __future__ import annotations

from typing import Any
from typing import Literal

from pydantic import Field

from ciq_tune.engine.config import EngineConfig

SCREENED_DEFAULTS: dict[str, Any] = {
    "pool_size": 4,
    "gamma": 0.25,
    "max_good": 25,
    "screen_factor": 32,
    "random_share": 0.25,
    "local_share": 0.5,
    "bandwidth": 0.2,
    "multivariate": True,
    "polish_share": 0.5,
    "explore_after": 8,
    "explore_share": 0.25,
    "wide_explore_share": 0.5,
    "explore_sampling": "auto",
    "converged_explore_share": 1.0,
    "wide_initial_points": 16,
    "listed_initial_points": 6,
    "restart_share": 1.0,
    "restart_sigma": 4.0,
    "settle_progress": 0.01,
    "settle_after": 16,
    "ranking": "auto",
    "length_scales": "per_parameter",
    "local_picks": 1,
    "process_picks_until": 100,
}


class ScreenedGAConfig(EngineConfig):
    """Settings of `ScreenedGA`; defaults in `SCREENED_DEFAULTS`.

    Args:
        gamma: share of successful evaluations that form the good density l(x).
        max_good: at most this many evaluations form l(x) (Optuna's gamma cap of 25).
        screen_factor: candidates drawn per candidate kept.
        random_share: share of drawn candidates that are uniform random (exploration).
        local_share: share of drawn candidates that are pattern moves around the elite; the
            rest are crossover children of the population.
        bandwidth: kernel width of ordered parameters at one observation, as a fraction of
            the range (`engine/parzen.py`).
        multivariate: one product kernel per observation instead of independent parameters.
        polish_share: share of each generation spent on trust-region moves around the best.
        explore_after: generations without a new best after which part of each generation is
            evaluated unscreened.
        explore_share: share of each generation drawn unscreened while stagnating.
        wide_explore_share: the same share in a space with a wide parameter, where the
            polishing settles in the basin it started in and only coverage finds another.
        explore_sampling: how those are drawn: uniformly, each the farthest of `MAXIMIN_DRAWS`
            uniform draws from everything proposed (maximin), or "auto": maximin in a space
            with a wide parameter, uniform otherwise.
        converged_explore_share: share of each generation explored in a space with a wide
            parameter once the compass search's poll around the best is used up.
        wide_initial_points: size of the first generation in a space with a wide parameter
            (warm-start points included): a scrambled Sobol' design whose rows that break
            the constraints are replaced by maximin draws (at most `pool_size`, or a budget
            in `max_generations`: the first generation of every space, `initial_sampling`).
        listed_initial_points: size of the first generation where the process ranks the
            listed space (`ranking`; warm-start points included): a greedy maximin design, each
            configuration the listed one farthest from those before it (a budget in
            `max_generations`: `pool_size`).
        restart_share: share of each such generation spent instead on a local descent from an
            explored configuration in a basin nobody has descended (`engine/multistart.py`);
            0 never restarts.
        restart_sigma: MLSL's factor of the critical distance within which a configuration
            must be the lowest to start a descent (larger: fewer descents).
        settle_progress: an improvement of the best by less than this share of the values'
            spread (median - best) is no progress.
        settle_after: evaluations without progress after which, in a space with a wide
            parameter, the part of each generation that is not polishing restarts (descends or
            explores) instead of being screened, before the polish's poll is used up.
        ranking: what picks the screened part of a generation: the density ratio over the
            drawn candidates ("parzen"), or the expected improvement of a Gaussian process over
            every never-proposed feasible configuration ("gaussian_process"); "auto": the
            process in a space without a wide parameter that lists at most `MAX_LISTED`
            feasible configurations, unless the search starts from an earlier one
            (`transfer_from`); the ratio elsewhere.
        length_scales: the process's length scales: one for all parameters ("shared"), or one
            per parameter under a prior that keeps them near its whole range
            (`engine/gaussian_process.py`).
        local_picks: of each generation's picks by the process, this many are the highest
            expected improvement among configurations that change at most `LOCAL_CHANGES`
            parameters of the best one (a `steady_state` search's single picks: with
            probability `local_picks` / `pool_size`).
        process_picks_until: in a space with a wide parameter, until the evaluations number
            this many, the screened part of a generation is the drawn candidates of highest
            expected improvement under a Gaussian process (`GeneticEngine._process_picks`),
            not of highest density ratio; 0: always the ratio.
    """

    pool_size: int = Field(default=SCREENED_DEFAULTS["pool_size"], ge=2)
    gamma: float = Field(default=SCREENED_DEFAULTS["gamma"], gt=0, lt=1)
    max_good: int = Field(default=SCREENED_DEFAULTS["max_good"], ge=1)
    screen_factor: int = Field(default=SCREENED_DEFAULTS["screen_factor"], ge=1)
    random_share: float = Field(default=SCREENED_DEFAULTS["random_share"], ge=0, le=1)
    local_share: float = Field(default=SCREENED_DEFAULTS["local_share"], ge=0, le=1)
    bandwidth: float = Field(default=SCREENED_DEFAULTS["bandwidth"], gt=0, le=1)
    multivariate: bool = SCREENED_DEFAULTS["multivariate"]
    polish_share: float = Field(default=SCREENED_DEFAULTS["polish_share"], ge=0, le=1)
    explore_after: int = Field(default=SCREENED_DEFAULTS["explore_after"], ge=1)
    explore_share: float = Field(default=SCREENED_DEFAULTS["explore_share"], ge=0, le=1)
    wide_explore_share: float = Field(default=SCREENED_DEFAULTS["wide_explore_share"], ge=0, le=1)
    explore_sampling: Literal["uniform", "maximin", "auto"] = SCREENED_DEFAULTS["explore_sampling"]
    converged_explore_share: float = Field(
        default=SCREENED_DEFAULTS["converged_explore_share"], ge=0, le=1
    )
    wide_initial_points: int = Field(default=SCREENED_DEFAULTS["wide_initial_points"], ge=0)
    listed_initial_points: int = Field(default=SCREENED_DEFAULTS["listed_initial_points"], ge=1)
    restart_share: float = Field(default=SCREENED_DEFAULTS["restart_share"], ge=0, le=1)
    restart_sigma: float = Field(default=SCREENED_DEFAULTS["restart_sigma"], gt=0)
    settle_progress: float = Field(default=SCREENED_DEFAULTS["settle_progress"], ge=0)
    settle_after: int = Field(default=SCREENED_DEFAULTS["settle_after"], ge=1)
    ranking: Literal["parzen", "gaussian_process", "auto"] = SCREENED_DEFAULTS["ranking"]
    length_scales: Literal["shared", "per_parameter"] = SCREENED_DEFAULTS["length_scales"]
    local_picks: int = Field(default=SCREENED_DEFAULTS["local_picks"], ge=0)
    process_picks_until: int = Field(default=SCREENED_DEFAULTS["process_picks_until"], ge=0)
