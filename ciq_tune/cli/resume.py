"""`ciq-tune resume`: its arguments, run by `searchers.run.resume`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ciq_tune.cli._options import add_verbose
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register


def _resume_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="output folder of an interrupted `tune`")
    parser.add_argument("--address", help="Ray cluster address (default: as the run had it)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of a local Ray (default: as before)")
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="resume a run made on Ray (--address, --runtime ray): restoring its Tune "
        "experiment unpickles the files in RUN_DIR/ray, which can run any code; only for a "
        "folder you wrote yourself",
    )
    add_verbose(parser)


def _resume(args: argparse.Namespace) -> int:
    from searchers.run import resume

    return resume(
        args.run_dir,
        address=args.address,
        num_cpus=args.num_cpus,
        trust_pickle=args.trust_pickle,
        verbose=args.verbose,
        started=getattr(args, "started", None),
    )


register(
    Command(
        "resume",
        "finish an interrupted `ciq-tune tune` run and write its outputs",
        "Continue the search of RUN_DIR from its saved state (a local run's\n"
        "search_state.json, JSON; a Ray run's Tune experiment, pickled: --trust-pickle), so\n"
        "the budget is kept and no configuration is evaluated twice; run it to the end,\n"
        "validate the top K as the run was told to, and write the same outputs as `tune`:\n"
        "evaluations table, controls file and validation.json.\n\n"
        "  ciq-tune resume ciq-tune-out",
        _resume_args,
        _resume,
    )
)
