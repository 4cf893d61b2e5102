"""`ciq-tune validate`: re-check a speedup from two files of repetitions."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register

# The options that set a `ValidationConfig` field, by default to the field's default: flag,
# field (the option's destination), type, help.
_CONFIG_OPTIONS: tuple[tuple[str, str, type, str], ...] = (
    ("--alpha", "alpha", float, "the rank test's two-sided p must be below this"),
    ("--min-speedup", "min_speedup", float, "the CI's lower bound must exceed this"),
    ("--confidence", "confidence", float, "level of the bootstrap CI"),
    ("--bootstrap", "n_bootstrap", int, "resamples"),
)


def _validate_args(parser: argparse.ArgumentParser) -> None:
    from ciq_tune.validation import VALIDATION_DEFAULTS

    parser.add_argument("baseline", type=Path, help="baseline timings (JSON list or text)")
    parser.add_argument("candidate", type=Path, help="candidate timings, same unit")
    d = VALIDATION_DEFAULTS
    for flag, field, kind, text in _CONFIG_OPTIONS:
        parser.add_argument(
            flag,
            dest=field,
            # The metavar argparse derives from the flag (`dest` would make it N_BOOTSTRAP).
            metavar=flag.removeprefix("--").replace("-", "_").upper(),
            type=kind,
            default=d[field],
            help=f"{text} (default %(default)s)",
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


def _validate(args: argparse.Namespace) -> int:
    """Exit status 0 when KEPT, 1 when REJECTED."""
    from ciq_tune.validation import ValidationConfig
    from ciq_tune.validation import compare_samples
    from ciq_tune.validation import format_result
    from ciq_tune.validation import load_timings

    settings = {field: getattr(args, field) for _, field, _, _ in _CONFIG_OPTIONS}
    config = ValidationConfig(**settings, mode=args.mode, seed=args.seed)
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


register(
    Command(
        name="validate",
        help="re-check a speedup: ratio of medians, its bootstrap CI, a rank test, a verdict",
        description=(
            "Compare repetitions of a baseline and a candidate: the speedup (ratio of medians),\n"
            "its bootstrap CI and a rank test (--paired, for interleaved rounds: a paired\n"
            "bootstrap and Wilcoxon signed-rank on per-round log ratios; else Mann-Whitney U).\n"
            'Each file holds one value per repetition: a JSON list, {"times_ms": [...]}, or\n'
            "numbers separated by spaces, commas or newlines. Exits 0 when the speedup is KEPT\n"
            "(p < alpha and the CI's lower bound above --min-speedup), 1 when REJECTED.\n"
            "`ciq-tune tune` does this by itself for its top K (--validate-top). See\n"
            "docs/validation.md.\n\n"
            "  ciq-tune validate base_ms.txt cand_ms.txt\n"
            "  ciq-tune validate base.json cand.json --json --controls out/matmul.controls.yaml"
        ),
        configure=_validate_args,
        run=_validate,
    )
)
