"""`ciq-tune apply`: print the compiler arguments of a controls file."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from ciq_tune.cli._options import add_vendor_controls
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register


def _apply_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="controls file (YAML)")
    parser.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text: one line per compiler, shell-quoted for reading; json: lists/objects",
    )
    parser.add_argument(
        "--shape",
        type=_sizes_arg,
        metavar="NAME=INT,…",
        help="a file tuned over `shapes`: the configuration the launch-time rule picks for "
        "these sizes (default: the file's top-level one, that of the heaviest bucket)",
    )
    add_vendor_controls(parser)


def _sizes_arg(text: str) -> dict[str, int]:
    """``M=16,N=4096`` as a size mapping."""
    sizes: dict[str, int] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit():
            raise argparse.ArgumentTypeError(f"expected NAME=INT[,NAME=INT…], got {text!r}")
        sizes[name.strip()] = int(value)
    return sizes


def _apply(args: argparse.Namespace) -> int:
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.runtime import TunedKernel

    loaded = cf.load(args.file)
    rendered: dict[str, Any] = dict(cf.render(loaded, vendor_controls_files=args.vendor_controls))
    params = loaded.params
    if args.shape is not None:
        entry = TunedKernel(loaded, source=str(args.file)).entry_for(args.shape)
        params, rendered = entry.params, dict(entry.rendered)
    if args.format == "json":
        print(json.dumps({"params": params, **rendered}, indent=2))
        return 0
    for name, value in rendered.items():
        text = shlex.join(value) if isinstance(value, list) else json.dumps(value)
        print(f"{name}: {text}")
    if params:
        print(f"params: {json.dumps(params)}")
    return 0


register(
    Command(
        "apply",
        "print the compiler arguments (or Triton kwargs) of a controls file",
        "Re-validate a controls file against the installed compilers and print what to pass:\n"
        "argument lists for ptxas/nvcc, keyword arguments for a Triton launch. A file naming an\n"
        "option the catalog does not offer, a disallowed value or a path is rejected.\n\n"
        "  ciq-tune apply spill.controls.yaml\n"
        "  ciq-tune apply matmul.controls.yaml --shape M=16,N=4096,K=4096\n"
        "  ptxas $(ciq-tune apply spill.controls.yaml --format json | jq -r '.ptxas[]') …",
        _apply_args,
        _apply,
    )
)
