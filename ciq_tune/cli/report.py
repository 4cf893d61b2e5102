"""`ciq-tune report`: plots and one HTML page of a finished run."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register

if TYPE_CHECKING:
    pass


def _report(args: argparse.Namespace) -> int:
    from ciq_tune.report import report_main

    return report_main(args)


def _report_args(parser: argparse.ArgumentParser) -> None:
    from ciq_tune.report import add_report_arguments

    add_report_arguments(parser)


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
        configure=_report_args,
        run=_report,
    )
)
