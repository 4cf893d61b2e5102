"""Layer rules that `lint-imports` (pyproject.toml) cannot see: what loading a module loads."""

from __future__ import annotations

import subprocess
import sys

# Everything below `searchers`: importing it must not load Ray (about 1 s and 300 MB).
BELOW_SEARCHERS = [
    "ciq_tune",
    "ciq_tune.engine",
    "ciq_tune.space",
    "ciq_tune.controls",
    "ciq_tune.validation",
    "ciq_tune.results",
    "objectives",
    "objectives.description",
    "objectives.ptx",
]


def test_modules_below_searchers_import_without_ray() -> None:
    imports = "; ".join(f"import {name}" for name in BELOW_SEARCHERS)
    code = (
        f"import sys; {imports}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_lazy_entry_point_loads_the_searcher() -> None:
    code = "from ciq_tune import CompileIQSearcher; print(CompileIQSearcher.__module__)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "searchers.compileiq_searcher"
