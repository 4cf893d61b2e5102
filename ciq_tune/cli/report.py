"""`ciq-tune report`: plots and one HTML page of a finished run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register
from ciq_tune.errors import ReportError
from ciq_tune.results import Objective


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ciq-tune report RUN_DIR`."""
    parser.add_argument("run", type=Path, help="run folder with evaluations.parquet/.csv")
    parser.add_argument("--out", type=Path, help="output folder (default RUN_DIR/report)")
    parser.add_argument(
        "--objective",
        action="append",
        default=[],
        metavar="NAME[:min|max]",
        help="objective column and direction (repeatable; default: all numeric metrics, min)",
    )
    parser.add_argument("--title", help="page title (default: the run folder's name)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the importance model")


def report_main(args: argparse.Namespace) -> int:
    """Run `ciq-tune report`; prints the path of the HTML page."""
    from ciq_tune.report import build_report

    objectives = [parse_objective(text) for text in args.objective]
    report = build_report(
        args.run, args.out, objectives=objectives or None, title=args.title, seed=args.seed
    )
    print(f"{report.n_evaluations} evaluations ({report.n_ok} ok); wrote {report.html}")
    return 0


def parse_objective(text: str) -> Objective:
    """`"time_ms"` or `"time_ms:min"` / `"tflops:max"` as an `Objective`."""
    name, _, mode = text.partition(":")
    if mode not in ("", "min", "max") or not name:
        raise ReportError(f"`--objective` is NAME or NAME:min or NAME:max, got {text!r}")
    return Objective(name=name, mode=_mode(mode or "min"))


def _mode(text: str) -> Literal["min", "max"]:
    return "max" if text == "max" else "min"


register(
    Command(
        name="report",
        help="plots and one HTML page (convergence, Pareto front, parameter importance)",
        description=(
            "Build PNGs and one self-contained report.html from a finished run's evaluations\n"
            "table (RUN_DIR/evaluations.parquet or .csv, written by `ciq-tune tune`):\n"
            "convergence, Pareto front (2-3 objectives), parameter importance and, when the run\n"
            "has validation.json, the re-measured top K. Written to RUN_DIR/report/.\n\n"
            "  ciq-tune report ciq-tune-out\n"
            "  ciq-tune report runs/demo --objective time_ms:min --objective energy_mj:min"
        ),
        configure=add_report_arguments,
        run=report_main,
    )
)
