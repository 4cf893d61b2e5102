"""How a re-measurement is taken and judged: `ValidationConfig` and its one source of defaults."""

from __future__ import annotations

from typing import Any
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

KEPT: Literal["KEPT"] = "KEPT"
REJECTED: Literal["REJECTED"] = "REJECTED"

VALIDATION_DEFAULTS: dict[str, Any] = {
    # Untimed rounds of each side before measuring: first launches pay for JIT, caches, clocks.
    "warmup": 5,
    # Timed rounds per side. bench/validation_power.py on noise recorded on an H200
    # (docs/validation.md): at 50 paired rounds a true 3 % speedup is kept and identical
    # configurations are rejected well inside the 5 % error rates the project promises.
    "repetitions": 50,
    # Looks at the rounds so far, evenly spaced, the last at `repetitions`: the comparison stops
    # at the first look that decides. Each look tests at alpha / looks (Bonferroni over looks),
    # so the error rates of one comparison stay those of a single test at alpha.
    "looks": 5,
    # The paired test's two-sided p-value must be below this (divided by the number of
    # candidates compared: Bonferroni).
    "alpha": 0.05,
    # The lower end of the speedup's confidence interval must be above this (1.0: "faster").
    "min_speedup": 1.0,
    # A look also stops when the interval's upper end is below min_speedup × (1 + this): even
    # the optimistic end is a speedup too small to ship (futility), so more rounds are wasted.
    "futility_margin": 0.01,
    "confidence": 0.95,
    "n_bootstrap": 5000,
    "mode": "min",
    "seed": 0,
    # Parameters are the search's lever, and every reset is one more paired comparison (a
    # no-effect one runs to the last look): only controls must earn their place by default.
    "simplify_params": False,
}
"""One source of the defaults of `ValidationConfig` and the `validate` command line."""


MIN_LOOK_ROUNDS = 10
"""Fewest timed rounds per look of a sequential comparison (see `ValidationConfig.looks`)."""


class ValidationConfig(BaseModel):
    """How to re-measure and when to keep a candidate.

    The statistic is always the ratio of medians (robust to the launch outliers GPU timings
    have); see `ciq_tune.validation.statistics.compare_samples` for the tests.

    Attributes:
        warmup: untimed rounds of each side before measuring (interleaved too).
        repetitions: timed rounds per side, at most (see `looks`).
        looks: evenly spaced checks of the rounds so far, the last after `repetitions`, each of
            at least `MIN_LOOK_ROUNDS` rounds (fewer looks when `repetitions` is small); the
            comparison stops at the first look where the candidate is KEPT or its interval
            lies wholly below `min_speedup` × (1 + `futility_margin`). Each look tests at
            alpha / looks and a 1 - (1 - confidence) / looks interval, so both error rates stay
            below those of one test (Bonferroni over the looks: a Pocock-like
            group-sequential design, conservative). 1: one test after `repetitions` rounds.
        alpha: significance level of the two-sided test (Wilcoxon signed-rank on the per-round
            log ratios for interleaved rounds, Mann-Whitney U for independent samples).
        min_speedup: the bootstrap confidence interval's lower bound must exceed this.
        futility_margin: a look rejects the candidate early when its interval's upper end is
            below `min_speedup` × (1 + this): at best a speedup too small to ship. Stopping
            only ever rejects, so the false-accept rate is unchanged; a true speedup below the
            margin is the one more often rejected early. 0: stop early only below
            `min_speedup`.
        confidence: confidence level of the bootstrap interval (two-sided).
        n_bootstrap: bootstrap resamples.
        mode: "min" when lower values are better (times), "max" when higher are (throughput).
        seed: seed of the bootstrap's random generator.
        simplify_params: after validation, also reset each kernel parameter of the winner that
            differs from the baseline's unless a paired re-measurement shows it faster (see
            `ciq_tune.controls.simplify.simplify_timed`); controls are always judged.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    warmup: int = Field(default=VALIDATION_DEFAULTS["warmup"], ge=0)
    repetitions: int = Field(default=VALIDATION_DEFAULTS["repetitions"], ge=5)
    looks: int = Field(default=VALIDATION_DEFAULTS["looks"], ge=1)
    alpha: float = Field(default=VALIDATION_DEFAULTS["alpha"], gt=0, lt=1)
    min_speedup: float = Field(default=VALIDATION_DEFAULTS["min_speedup"], gt=0)
    futility_margin: float = Field(default=VALIDATION_DEFAULTS["futility_margin"], ge=0)
    confidence: float = Field(default=VALIDATION_DEFAULTS["confidence"], gt=0, lt=1)
    n_bootstrap: int = Field(default=VALIDATION_DEFAULTS["n_bootstrap"], ge=100)
    mode: Literal["min", "max"] = VALIDATION_DEFAULTS["mode"]
    seed: int = VALIDATION_DEFAULTS["seed"]
    simplify_params: bool = VALIDATION_DEFAULTS["simplify_params"]

    def look_rounds(self) -> list[int]:
        """The rounds after which the comparison looks: `looks` evenly spaced counts, the
        last `repetitions`, each at least `MIN_LOOK_ROUNDS` apart."""
        looks = max(1, min(self.looks, self.repetitions // MIN_LOOK_ROUNDS))
        return [-(-self.repetitions * j // looks) for j in range(1, looks + 1)]

    def corrected(self, comparisons: int) -> ValidationConfig:
        """These settings for one of `comparisons` tests (Bonferroni): alpha / m and a
        (1 - (1 - confidence) / m) interval, so the chance that any noise-only candidate
        passes stays below alpha.

        Raises:
            ValueError: `comparisons` < 1.
        """
        if comparisons < 1:
            raise ValueError(f"`comparisons` must be >= 1, got comparisons={comparisons}")
        return self.model_copy(
            update={
                "alpha": self.alpha / comparisons,
                "confidence": 1 - (1 - self.confidence) / comparisons,
            }
        )
