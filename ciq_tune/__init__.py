"""ciq-tune: an open, Ray Tune-native autotuner for GPU kernels and their compiler controls.

`ciq_tune` itself never imports Ray at load time; `CompileIQSearcher` is re-exported lazily
from `searchers` so that the engine can be used (and tested) without Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from ciq_tune import space
from ciq_tune.space import SearchSpace

if TYPE_CHECKING:
    from searchers.compileiq_searcher import CompileIQSearcher

__all__ = ["CompileIQSearcher", "SearchSpace", "space"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "CompileIQSearcher":
        from searchers.compileiq_searcher import CompileIQSearcher

        return CompileIQSearcher
    raise AttributeError(f"module 'ciq_tune' has no attribute {name!r}")
