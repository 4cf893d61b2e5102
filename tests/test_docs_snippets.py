"""The python blocks of docs/architecture.md and docs/compileiq-compat.md run as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks(name: str) -> list[str]:
    return BLOCK.findall((DOCS / name).read_text())


def _names() -> dict[str, Any]:
    """What the snippets leave to the reader: a generator, a count, a measured time."""
    return {"rng": np.random.default_rng(0), "n": 3}


def test_every_python_block_of_the_two_docs_is_checked() -> None:
    # A new block fails here until a test below runs it: none is skipped silently.
    assert len(_blocks("architecture.md")) == 2
    assert len(_blocks("compileiq-compat.md")) == 1


def test_architecture_space_and_engine_examples_run() -> None:
    space_block, engine_block = _blocks("architecture.md")
    names = _names()
    exec(space_block, names)
    assert names["space"].is_feasible(names["genes"])
    # The engine loop, its elisions filled in: wait → stop (nothing runs elsewhere), t → a time.
    assert "if cand is None: ..." in engine_block and '{"time_ms": t}' in engine_block
    loop = engine_block.replace("if cand is None: ...", "if cand is None: break").replace(
        '{"time_ms": t}', '{"time_ms": float(cand.config["BM"])}'
    )
    exec(loop, names)
    assert names["engine"].finished  # every candidate is told at once: ask never waits


def test_compat_import_lines_of_the_ciq_tune_column_run() -> None:
    (block,) = _blocks("compileiq-compat.md")
    lines = [line.split("#")[0] for line in block.splitlines()[1:]]
    ours = [line[53:].strip() for line in lines if len(line) > 53 and line[53:].strip()]
    assert ours == [
        "from ciq_tune import Search, SearchConfiguration",
        "import ciq_tune.space as ss",
    ]
    for line in ours:
        exec(line, {})
