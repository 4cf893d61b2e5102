"""ciq-tune: an open, Ray Tune-native autotuner for GPU kernels and their compiler controls.

`ciq_tune` itself never imports Ray at load time; `CompileIQSearcher` is re-exported lazily
from `searchers` so that the engine can be used (and tested) without Ray. The
CompileIQ-compatible `Search` API (`ciq_tune.compat`) and `capture` (kernel descriptions
recorded from a real run, `objectives.capture`) and `tune_kernel` (a kernel tuned from a
script, `searchers.run.tune_kernel`) are re-exported lazily too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from ciq_tune import space
from ciq_tune._version import __version__
from ciq_tune.space import SearchSpace

if TYPE_CHECKING:
    from ciq_tune.compat import BASELINE_DNA
    from ciq_tune.compat import INVALID_SCORE
    from ciq_tune.compat import MultiScoreComparison
    from ciq_tune.compat import Search
    from ciq_tune.compat import SearchConfiguration
    from ciq_tune.compat import SearchResult
    from ciq_tune.compat import WorkerTypes
    from objectives.capture import capture
    from searchers.compileiq_searcher import CompileIQSearcher
    from searchers.isolation import isolated_trainable
    from searchers.run.tune_kernel import tune_kernel

__all__ = [
    "BASELINE_DNA",
    "INVALID_SCORE",
    "CompileIQSearcher",
    "MultiScoreComparison",
    "Search",
    "SearchConfiguration",
    "SearchResult",
    "SearchSpace",
    "WorkerTypes",
    "__version__",
    "capture",
    "isolated_trainable",
    "space",
    "tune_kernel",
]


def __getattr__(name: str) -> Any:
    if name == "CompileIQSearcher":
        from searchers.compileiq_searcher import CompileIQSearcher

        return CompileIQSearcher
    if name == "isolated_trainable":
        from searchers.isolation import isolated_trainable

        return isolated_trainable
    if name == "capture":
        from objectives.capture import capture

        return capture
    if name == "tune_kernel":
        from searchers.run.tune_kernel import tune_kernel

        return tune_kernel
    if name in __all__:
        # The rest of `__all__` is CompileIQ's API, loaded on first use: `ciq_tune.compat`
        # loads pandas (and its `Search.start()` Ray).
        import ciq_tune.compat

        return getattr(ciq_tune.compat, name)
    raise AttributeError(f"module 'ciq_tune' has no attribute {name!r}")
