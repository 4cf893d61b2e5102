"""Ray Tune adapters over the ciq-tune engine."""

from __future__ import annotations

from searchers.compileiq_searcher import CompileIQSearcher

__all__ = ["CompileIQSearcher"]
