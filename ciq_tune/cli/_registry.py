"""The subcommand registry of `ciq-tune`: one `Command` per subcommand, the parser, `main`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass

from ciq_tune.errors import CiqTuneError

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


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command."""
    parser = argparse.ArgumentParser(
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `ciq-tune`; returns the exit status (errors: 2 with the message)."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.handler(args)
    except CiqTuneError as exc:
        print(f"ciq-tune {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return status
