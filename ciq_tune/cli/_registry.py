"""The subcommand registry of `ciq-tune`: one `Command` per subcommand, the parser, `main`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from pydantic import ValidationError

from ciq_tune.errors import CiqTuneError
from searchers.run.interrupt import EXIT_INTERRUPTED

Handler = Callable[[argparse.Namespace], int]
Configure = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, long description, arguments and handler."""

    name: str
    help: str
    description: str
    configure: Configure
    run: Handler


COMMANDS: dict[str, Command] = {}


def register(cmd: Command) -> None:
    """Add a subcommand (a later registration of the same name replaces the earlier one)."""
    COMMANDS[cmd.name] = cmd


class UsageError(CiqTuneError):
    """A command line that does not parse (unknown option, missing or malformed argument)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line from `main`, like every other error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command."""
    parser = _Parser(
        prog="ciq-tune",
        description=(
            "Tune GPU kernels and their compiler controls with Ray Tune. A kernel is given by a "
            "description file (docs/kernel-description.md); the tuned controls are written to a "
            "reviewable controls file (docs/controls-file.md)."
        ),
        epilog="Example: ciq-tune tune examples/kernels/ptx/spill.yaml --budget 40",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for cmd in COMMANDS.values():
        child = sub.add_parser(
            cmd.name,
            help=cmd.help,
            description=cmd.description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        cmd.configure(child)
        child.set_defaults(handler=cmd.run)
    return parser


EXIT_ERROR = 2
"""Exit status of a run stopped by an error (bad arguments, files or fields)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `ciq-tune`; returns the exit status.

    Every error is one line on stderr, ``ciq-tune: error: <file, field, rule>``, with exit
    status 2 (never a traceback); an interrupt (Ctrl+C) exits with 130.
    """
    started = time.time()
    try:
        args = build_parser().parse_args(argv)
        args.started = started  # when the command started: what its first result is timed from
        status: int = args.handler(args)
    except KeyboardInterrupt:
        print("ciq-tune: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (CiqTuneError, OSError, ValidationError) as exc:
        print(f"ciq-tune: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    return status


def one_line(exc: BaseException) -> str:
    """An error's message on one line (pydantic: its first error, with the field)."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        text = f"{exc.title}: field `{where}`: {first['msg']}"
    elif isinstance(exc, OSError) and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())
