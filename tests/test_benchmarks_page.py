"""docs/benchmarks.md: every command a row names is in the repository (a module run with
``python -m``, a script, a `ciq-tune` command), so that each number can be reproduced."""

from __future__ import annotations

import re
from pathlib import Path

from ciq_tune.cli import COMMANDS

REPO = Path(__file__).resolve().parents[1]
PAGE = (REPO / "docs/benchmarks.md").read_text()


def test_every_module_the_page_runs_exists() -> None:
    modules = set(re.findall(r"python3? -m ((?:bench|ciq_tune)(?:\.\w+)+)", PAGE))
    assert len(modules) > 15  # the page's commands were found
    paths = {m: REPO / Path(*m.split(".")) for m in modules}
    runnable = {
        m
        for m, p in paths.items()
        if p.with_suffix(".py").is_file() or (p / "__main__.py").is_file()
    }
    assert modules == runnable, modules - runnable


def test_every_script_the_page_runs_exists() -> None:
    scripts = set(
        re.findall(r"(?:python3?|bash) ((?:scripts|bench|examples|cluster)/[\w./-]+)", PAGE)
    )
    assert scripts
    assert not [s for s in scripts if not (REPO / s).is_file()]


def test_every_ciq_tune_command_the_page_runs_exists() -> None:
    commands = set(re.findall(r"`ciq-tune (\w+)", PAGE))
    assert {"tune", "verify"} <= commands
    assert not commands - set(COMMANDS)
