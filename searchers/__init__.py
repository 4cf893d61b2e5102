"""Ray Tune adapters over the ciq-tune engine, and the kernel searches that run on them (or,
on one machine, on local worker processes: `searchers.local_search`, which imports no Ray).

The names below are imported on first use, so importing a module of this package that needs
no Ray does not load it (seconds).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["CompileIQSearcher", "isolated_trainable", "results_from_result_grid"]

_HOMES = {
    "CompileIQSearcher": "searchers.compileiq_searcher",
    "isolated_trainable": "searchers.isolation",
    "results_from_result_grid": "searchers.results",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'searchers' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
