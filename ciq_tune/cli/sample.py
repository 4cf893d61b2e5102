"""`ciq-tune sample`: print random configurations of a description's search space."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register
from ciq_tune.errors import CiqTuneError

if TYPE_CHECKING:
    pass


def _sample_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("description", type=Path, help="kernel description file (YAML or JSON)")
    parser.add_argument("-n", type=int, default=5, help="configurations to print (default 5)")
    parser.add_argument("--seed", type=int, help="sampling seed (default: unseeded)")


def _sample(args: argparse.Namespace) -> int:
    from objectives import load_description
    from objectives import make_search_space

    if args.n < 1:
        raise CiqTuneError(f"`-n` must be a positive number of configurations, got {args.n}")
    space = make_search_space(load_description(args.description))
    for config in space.sample(args.n, seed=args.seed):
        print(json.dumps(config, sort_keys=True))
    return 0


register(
    Command(
        "sample",
        "print random configurations of a kernel description's search space",
        "Draw N distinct feasible configurations of the description's parameters and compiler\n"
        "controls, one JSON object per line, exactly as a trainable receives them (nothing is\n"
        "compiled or run).\n\n"
        "  ciq-tune sample examples/kernels/ptx/spill.yaml -n 3 --seed 0",
        _sample_args,
        _sample,
    )
)
