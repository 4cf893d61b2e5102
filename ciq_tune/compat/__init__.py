"""A CompileIQ-compatible API (`Search`, `SearchConfiguration`, `SearchResult`) on Ray Tune.

A program written against CompileIQ's documented Search API runs with its import lines
changed to::

    from ciq_tune import Search, SearchConfiguration
    import ciq_tune.space as ss

Ray is imported only when `Search.start()` runs. See docs/compileiq-compat.md.
"""

from __future__ import annotations

from ciq_tune.compat.config import BASELINE_DNA
from ciq_tune.compat.config import INVALID_SCORE
from ciq_tune.compat.config import MultiScoreComparison
from ciq_tune.compat.config import SearchConfiguration
from ciq_tune.compat.config import WorkerTypes
from ciq_tune.compat.results import SearchResult
from ciq_tune.compat.search import Search

__all__ = [
    "BASELINE_DNA",
    "INVALID_SCORE",
    "MultiScoreComparison",
    "Search",
    "SearchConfiguration",
    "SearchResult",
    "WorkerTypes",
]
