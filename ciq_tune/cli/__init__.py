"""The `ciq-tune` command line: one module per subcommand, registered in `_registry`."""

from __future__ import annotations

from ciq_tune.cli import apply
from ciq_tune.cli import check
from ciq_tune.cli import report
from ciq_tune.cli import resume
from ciq_tune.cli import sample
from ciq_tune.cli import tune
from ciq_tune.cli import validate
from ciq_tune.cli import verify
from ciq_tune.cli._registry import COMMANDS
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import build_parser
from ciq_tune.cli._registry import main
from ciq_tune.cli._registry import register

# The command modules register themselves on import; their order is the order of `--help`.
__all__ = [
    "COMMANDS",
    "Command",
    "apply",
    "build_parser",
    "check",
    "main",
    "register",
    "report",
    "resume",
    "sample",
    "tune",
    "validate",
    "verify",
]
