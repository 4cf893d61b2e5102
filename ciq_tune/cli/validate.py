"""`ciq-tune validate`: re-check a speedup from two files of repetitions."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register

if TYPE_CHECKING:
    pass


def _validate(args: argparse.Namespace) -> int:
    from ciq_tune.validation import validate_main

    return validate_main(args)


def _validate_args(parser: argparse.ArgumentParser) -> None:
    from ciq_tune.validation import add_validate_arguments

    add_validate_arguments(parser)


register(
    Command(
        name="validate",
        help="re-check a speedup: Welch's t, Cohen's d, bootstrap CI of the speedup, a verdict",
        description=(
            "Compare repetitions of a baseline and a candidate, measured interleaved (ABAB…):\n"
            "Welch's t-test, Cohen's d and a bootstrap CI of the speedup (ratio of medians).\n"
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
