"""What the bench scripts share: the command line of a script run as ``python -m bench.NAME``,
the machine it ran on, its jobs spread over worker processes, and its report written out."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import TypeVar

Job = TypeVar("Job")
Run = TypeVar("Run")


def script_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of the bench script run as `prog` (``python -m bench.battery``): its module
    docstring `doc`, laid out as written (tables, commands), is the help's description."""
    return argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def machine() -> str:
    """The host, its processor and CPU count, for a report's provenance."""
    return f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"


def run_jobs(run: Callable[[Job], Run], jobs: Sequence[Job], workers: int) -> list[Run]:
    """`run` of every job: in `workers` forked processes (in the order they finish) when more
    than one, else one after the other here."""
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return list(pool.imap_unordered(run, jobs))
    return [run(job) for job in jobs]


def write_report(out: str | Path, report: Any, table: str) -> None:
    """`report` as JSON in `out`, the markdown `table` beside it (``.md``), and the table
    printed."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    path.with_suffix(".md").write_text(table)
    print(table)
