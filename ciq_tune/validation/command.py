"""The `ciq-tune validate` command: statistics over two files of collected timings."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ciq_tune.validation.settings import VALIDATION_DEFAULTS
from ciq_tune.validation.settings import ValidationConfig
from ciq_tune.validation.statistics import compare_samples
from ciq_tune.validation.statistics import format_result
from ciq_tune.validation.timings_file import load_timings


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ciq-tune validate` (statistics over two files of collected timings)."""
    parser.add_argument("baseline", type=Path, help="baseline timings (JSON list or text)")
    parser.add_argument("candidate", type=Path, help="candidate timings, same unit")
    d = VALIDATION_DEFAULTS
    parser.add_argument(
        "--alpha",
        type=float,
        default=d["alpha"],
        help="the rank test's two-sided p must be below this (default %(default)s)",
    )
    parser.add_argument(
        "--min-speedup",
        type=float,
        default=d["min_speedup"],
        help="the CI's lower bound must exceed this (default %(default)s)",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=d["confidence"],
        help="level of the bootstrap CI (default %(default)s)",
    )
    parser.add_argument(
        "--bootstrap", type=int, default=d["n_bootstrap"], help="resamples (default %(default)s)"
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="the files hold interleaved rounds, value i of each from the same round: paired "
        "bootstrap and Wilcoxon signed-rank test (default: independent samples, Mann-Whitney U)",
    )
    parser.add_argument(
        "--mode", choices=["min", "max"], default=d["mode"], help="min: lower is better (times)"
    )
    parser.add_argument(
        "--seed", type=int, default=d["seed"], help="bootstrap seed (default %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.add_argument(
        "--controls",
        type=Path,
        metavar="FILE",
        help="store the statistics in this controls file's `validation` field",
    )


def validate_main(args: argparse.Namespace) -> int:
    """Run `ciq-tune validate`; exit status 0 when KEPT, 1 when REJECTED."""
    config = ValidationConfig(
        alpha=args.alpha,
        min_speedup=args.min_speedup,
        confidence=args.confidence,
        n_bootstrap=args.bootstrap,
        mode=args.mode,
        seed=args.seed,
    )
    result = compare_samples(
        load_timings(args.baseline),
        load_timings(args.candidate),
        config=config,
        measurement="interleaved" if args.paired else "samples",
    )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_result(result))
    if args.controls is not None:
        from ciq_tune.controls import controls_file as cf

        loaded = cf.load(args.controls)
        cf.write(args.controls, loaded.model_copy(update={"validation": result.to_dict()}))
    return 0 if result.kept else 1
