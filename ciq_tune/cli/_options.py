"""Options that several subcommands share."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_description(parser: argparse.ArgumentParser, help: str) -> None:
    """`--description`: the kernel description file (YAML or JSON) behind the controls file a
    command reads; `help` says what the command does with it."""
    parser.add_argument("--description", type=Path, help=help)


def add_vendor_controls(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vendor-controls",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="allow the file to pass this vendor controls file to ptxas (repeatable)",
    )


def add_verbose(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also print every trial's output and Ray's worker messages here (default: quiet; "
        "they stay in Ray's logs: the trial actors' STDOUT in the dashboard of a cluster, see "
        "docs/cluster.md, or /tmp/ray/session_latest/logs/worker-*.out for a local Ray)",
    )
