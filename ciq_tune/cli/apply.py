"""`ciq-tune apply`: print the compiler arguments of a controls file."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from ciq_tune.cli._options import add_vendor_controls
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register

if TYPE_CHECKING:
    pass


def _apply_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="controls file (YAML)")
    parser.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text: one line per compiler, shell-quoted for reading; json: lists/objects",
    )
    add_vendor_controls(parser)


def _apply(args: argparse.Namespace) -> int:
    from ciq_tune.controls import controls_file as cf

    loaded = cf.load(args.file)
    rendered = cf.render(loaded, vendor_controls_files=args.vendor_controls)
    if args.format == "json":
        print(json.dumps({"params": loaded.params, **rendered}, indent=2))
        return 0
    for name, value in rendered.items():
        text = shlex.join(value) if isinstance(value, list) else json.dumps(value)
        print(f"{name}: {text}")
    if loaded.params:
        print(f"params: {json.dumps(loaded.params)}")
    return 0


register(
    Command(
        "apply",
        "print the compiler arguments (or Triton kwargs) of a controls file",
        "Re-validate a controls file against the installed compilers and print what to pass:\n"
        "argument lists for ptxas/nvcc, keyword arguments for a Triton launch. A file naming an\n"
        "option the catalog does not offer, a disallowed value or a path is rejected.\n\n"
        "  ciq-tune apply spill.controls.yaml\n"
        "  ptxas $(ciq-tune apply spill.controls.yaml --format json | jq -r '.ptxas[]') …",
        _apply_args,
        _apply,
    )
)
