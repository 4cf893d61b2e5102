"""`ciq-tune tune`: its arguments, read into `searchers.run.TuneOptions` and run by
`searchers.run.tune` (the path a run takes, from one description to a campaign, is there)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from ciq_tune.cli._options import add_verbose
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register
from searchers.placement import BENCHMARK_MODES
from searchers.run.options import BUDGET_PER_SHAPE
from searchers.run.options import DEFAULT_BUDGET
from searchers.run.options import RUNTIMES
from searchers.run.options import TRACKING
from searchers.run.options import VALIDATE_TOP
from searchers.run.options import TuneOptions


def _tune_args(parser: argparse.ArgumentParser) -> None:
    from ciq_tune.validation import VALIDATION_DEFAULTS

    parser.add_argument(
        "description",
        type=Path,
        nargs="+",
        help="kernel description file (YAML or JSON); several run as a campaign: all searches "
        "at once on the Ray cluster, OUT/campaign.csv lists them (docs/cluster.md)",
    )
    search = parser.add_argument_group("search", "what is searched and for how long")
    search.add_argument(
        "--budget",
        type=int,
        help=f"evaluations (default {DEFAULT_BUDGET}; where each shape of a matrix keeps its own "
        f"winner, {BUDGET_PER_SHAPE} per shape if that is more)",
    )
    search.add_argument("--seed", type=int, default=0, help="search seed (default 0)")
    search.add_argument(
        "--exhaustive",
        action="store_true",
        help="evaluate every configuration of the listed space once, whatever --budget says "
        "(a search whose space holds no more configurations than --budget does so anyway)",
    )
    search.add_argument(
        "--stages",
        action="store_true",
        help="staged search: the kernel parameters first with the compilers' defaults (70 %% "
        "of --budget), then the description's compiler controls on the 3 best parameter sets; "
        "prints what the controls added (search values, and re-measured with a CI when "
        "validation re-measured both stages' winners; docs/validation.md)",
    )
    search.add_argument(
        "--transfer-from",
        type=Path,
        metavar="RUN",
        help="start from an earlier run of this kernel (on another GPU, or another compiler): "
        "its output folder or evaluations table; its 4 best configurations that fit this "
        "space are evaluated first (one description without `shapes`)",
    )
    search.add_argument(
        "--vendor-controls",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="offer your own vendor controls file to the search as one opaque ptxas choice "
        "(--apply-controls FILE, against no file; repeatable; needs ptxas >= 13.3 and a "
        "description whose controls hold ptxas; the same as its "
        "`controls.ptxas.vendor_controls_files`)",
    )
    placement = parser.add_argument_group(
        "placement", "where the search runs and where candidates are timed"
    )
    placement.add_argument(
        "--runtime",
        choices=list(RUNTIMES),
        default="auto",
        help=_choices_help("where the search runs", RUNTIMES),
    )
    placement.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    placement.add_argument("--num-cpus", type=int, help="CPUs of a local Ray (default: all)")
    placement.add_argument(
        "--benchmark",
        choices=list(BENCHMARK_MODES),
        default="auto",
        help=_choices_help("where candidates are timed", BENCHMARK_MODES),
    )
    placement.add_argument(
        "--trials-per-gpu",
        type=int,
        metavar="N",
        help="trials in flight per GPU (default: 1 with --benchmark in-trial, where they take "
        "turns on the GPU; with per-GPU benchmark servers, as many as the CPUs hold)",
    )
    validation = parser.add_argument_group(
        "validation", "the winner re-measured against the baseline (docs/validation.md)"
    )
    validation.add_argument(
        "--validate-top",
        type=int,
        metavar="K",
        help="after the search, re-measure the K best distinct configurations interleaved with "
        f"the baseline and write the best KEPT one, or the baseline (default {VALIDATE_TOP}; "
        "skipped for PTX compile statistics, which a recompile reproduces exactly; 0: off)",
    )
    validation.add_argument(
        "--validate-repetitions",
        type=int,
        default=VALIDATION_DEFAULTS["repetitions"],
        metavar="N",
        help="timed repetitions of each side per candidate (default %(default)s)",
    )
    validation.add_argument(
        "--simplify-params",
        action="store_true",
        help="after validation, also reset each parameter of the winner that differs from the "
        "baseline's unless a paired re-measurement shows it faster (its controls are always "
        "judged so; each reset is one more comparison)",
    )
    campaign = parser.add_argument_group(
        "campaign", "several descriptions, or one search per shape"
    )
    campaign.add_argument(
        "--shapes",
        nargs="+",
        metavar="SHAPE",
        help="one search per shape of each description's matrix, 'all' or labels "
        "such as M=16,N=4096,K=4096",
    )
    campaign.add_argument(
        "--search-timeout",
        type=float,
        metavar="S",
        help="stop a search's trials after S seconds, keeping its evaluations (default: no limit)",
    )
    output = parser.add_argument_group("output", "what is written and printed")
    output.add_argument(
        "--out", type=Path, default=Path("ciq-tune-out"), help="output folder (default %(default)s)"
    )
    output.add_argument(
        "--tracking",
        choices=TRACKING,
        default="mlflow",
        help="record trials in MLflow (an embedded sqlite store in OUT/mlflow.db; view it with "
        "`mlflow ui --backend-store-uri sqlite:///OUT/mlflow.db`), as log lines, or not at all",
    )
    output.add_argument(
        "--quiet",
        action="store_true",
        help="no progress line while the search runs (default: every 2 s on stderr, "
        "`done/budget evaluations, best <metric>, evals/s, failed: <status> <count>`)",
    )
    add_verbose(output)


def _choices_help(what: str, choices: dict[str, str]) -> str:
    """`what` an option says, then each choice with its meaning (``auto`` the default)."""
    said = [
        f"{name}{' (default)' if name == 'auto' else ''}: {meaning}"
        for name, meaning in choices.items()
    ]
    return f"{what}: {'; '.join(said)}"


def _tune(args: argparse.Namespace) -> int:
    from searchers.run import tune

    return tune(options_of(args))


def options_of(args: argparse.Namespace) -> TuneOptions:
    """The run `tune`'s arguments describe: each option is the `TuneOptions` field of its name
    (the positional descriptions are `descriptions`; lists become tuples)."""
    given = vars(args) | {"descriptions": args.description}
    values: dict[str, Any] = {}
    for field in dataclasses.fields(TuneOptions):
        value = given.get(field.name)
        values[field.name] = tuple(value) if isinstance(value, list) else value
    return TuneOptions(**values)


register(
    Command(
        "tune",
        "search kernel parameters and compiler controls; write the best controls file",
        "Run a Ray Tune search with CompileIQSearcher over the description's parameters and\n"
        "compiler controls. The compiler defaults and curated presets are evaluated first. At\n"
        "the end the K best configurations are re-measured interleaved with the defaults (the\n"
        "baseline; ratio of medians, paired bootstrap CI and Wilcoxon signed-rank test,\n"
        "KEPT/REJECTED, see docs/validation.md); the best\n"
        "KEPT one, or the baseline when none is kept, is written to OUT/<name>.controls.yaml\n"
        "with the statistics. OUT also gets evaluations.parquet/.csv and validation.json.\n"
        "--stages searches the parameters first, then the compiler controls on the 3 best\n"
        "parameter sets, and says what the controls added.\n\n"
        "  ciq-tune tune examples/kernels/ptx/spill.yaml --budget 40 --num-cpus 2\n"
        "  ciq-tune tune examples/kernels/triton/matmul.yaml --budget 200 --validate-top 5\n"
        "  ciq-tune tune examples/kernels/triton/matmul.yaml --budget 60 --stages\n"
        "  ciq-tune tune kernel.yaml --address ray://head:10001 --out results/",
        _tune_args,
        _tune,
    )
)
