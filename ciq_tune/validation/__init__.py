"""Re-measurement statistics and the end-of-search validation.

Modules: `settings` (`ValidationConfig`, defaults), `statistics` (ratio of medians, bootstrap
CI, Wilcoxon signed-rank / Mann-Whitney U, verdict), `interleaved` (rounds in which every side
runs once, and the sequential comparison), `top_k` (a search's best re-measured against its
baseline), and `timings_file` (timings read from a file; `ciq-tune validate`). See
docs/validation.md.
"""

from __future__ import annotations

from ciq_tune.validation.interleaved import RoundCounter
from ciq_tune.validation.interleaved import Timer
from ciq_tune.validation.interleaved import measure_interleaved
from ciq_tune.validation.interleaved import validate
from ciq_tune.validation.interleaved import validate_each
from ciq_tune.validation.settings import KEPT
from ciq_tune.validation.settings import REJECTED
from ciq_tune.validation.settings import VALIDATION_DEFAULTS
from ciq_tune.validation.settings import ValidationConfig
from ciq_tune.validation.statistics import SampleSummary
from ciq_tune.validation.statistics import ValidationResult
from ciq_tune.validation.statistics import compare_samples
from ciq_tune.validation.statistics import format_result
from ciq_tune.validation.statistics import median_ci
from ciq_tune.validation.timings_file import load_timings
from ciq_tune.validation.top_k import CandidateValidation
from ciq_tune.validation.top_k import Measure
from ciq_tune.validation.top_k import SearchValidation
from ciq_tune.validation.top_k import validate_search
from ciq_tune.validation.top_k import validate_top_k

__all__ = [
    "KEPT",
    "REJECTED",
    "VALIDATION_DEFAULTS",
    "CandidateValidation",
    "Measure",
    "RoundCounter",
    "SampleSummary",
    "SearchValidation",
    "Timer",
    "ValidationConfig",
    "ValidationResult",
    "compare_samples",
    "format_result",
    "load_timings",
    "measure_interleaved",
    "median_ci",
    "validate",
    "validate_each",
    "validate_search",
    "validate_top_k",
]
