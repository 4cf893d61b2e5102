"""Ray Tune adapters over the ciq-tune engine."""

from __future__ import annotations

from searchers.compileiq_searcher import CompileIQSearcher
from searchers.isolation import isolated_trainable
from searchers.results import results_from_result_grid

__all__ = ["CompileIQSearcher", "isolated_trainable", "results_from_result_grid"]
