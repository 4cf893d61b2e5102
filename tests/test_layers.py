"""Layer rules that `lint-imports` (pyproject.toml) cannot see: what loading a module loads, and
import circles through imports inside functions."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ciq_tune", "searchers", "objectives")

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


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of the project's modules, at any depth (inside functions too): a
    module imported as ``from package import name`` is the submodule where one exists."""

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {known(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {known(f"{node.module}.{alias.name}") for alias in node.names}
        graph[module] = {m for m in found if m is not None and m != module}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                out.append(sorted([v, *component]))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_through_others() -> None:
    # Imports inside functions count: a circle of them still ties the modules together.
    assert _circles(_imports(_modules())) == []


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
