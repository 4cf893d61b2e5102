"""What one run of `ciq-tune tune` is told (`TuneOptions`), its defaults, and the checks that
refuse a combination it cannot honour before anything starts."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ciq_tune.errors import CiqTuneError
from searchers.placement import BENCHMARK_MODES

DEFAULT_BUDGET = 50
"""Evaluations of a search without a budget; where each shape of a matrix keeps its own
winner, `BUDGET_PER_SHAPE` per shape if that is more (bench.matrix_replay on the LLM GEMM
matrix's sweep, docs/benchmarks.md)."""
BUDGET_PER_SHAPE = 8
VALIDATE_TOP = 3
"""Candidates a run re-measures against the baseline at the end, unless told otherwise."""
RUNTIMES = {
    "local": "worker processes on this machine (every CPU but one compiles, two benchmark "
    "workers per GPU time; no Ray to start)",
    "ray": "Ray Tune trials on a Ray cluster (a local one without --address)",
    "auto": "ray with --address, RAY_ADDRESS, --stages or several descriptions, else local",
}
"""Where a run's search runs, and what each choice means."""
TRACKING = ("mlflow", "log", "none")


@dataclass(frozen=True)
class TuneOptions:
    """One run of `ciq-tune tune`: the CLI's options as data, for `searchers.run.tune`.

    Args:
        descriptions: Kernel description files; several (or `shapes`) run as a campaign.
        out: The output folder.
        budget: Evaluations (None: `DEFAULT_BUDGET`, or `BUDGET_PER_SHAPE` per shape of a
            matrix whose shapes keep their own winners, if that is more).
        seed: The search's seed.
        address: A Ray cluster to join (None: start a local Ray when the run needs one).
        num_cpus: CPUs of a local Ray, or the local runtime's workers (None: all).
        trials_per_gpu: Trials in flight per GPU (None: the placement's default).
        benchmark: Where candidates are timed: ``auto``, ``per-gpu`` or ``in-trial``.
        runtime: ``auto``, ``local`` (worker processes on this machine) or ``ray``.
        shapes: A campaign's searches per shape (``all`` or shape labels).
        stages: Kernel parameters first, then compiler controls on the best few.
        search_timeout: A campaign search's time limit in seconds.
        tracking: ``mlflow``, ``log`` or ``none``.
        validate_top: Candidates re-measured at the end (None: `VALIDATE_TOP`; 0: off).
        validate_repetitions: Timed repetitions of each side per candidate (None: the
            validation's default).
        simplify_params: Also reset the winner's parameters that do not earn their place.
        transfer_from: An earlier run whose best configurations this search starts from.
        exhaustive: Every configuration of the listed space once, whatever the budget.
        vendor_controls: Vendor controls files offered to ptxas as opaque choices.
        quiet: No progress line.
        verbose: Trial output and Ray's worker messages printed here.
        started: When the command started (``time.time()``), what the first result is
            timed from; None: not timed.
    """

    descriptions: tuple[Path, ...]
    out: Path = Path("ciq-tune-out")
    budget: int | None = None
    seed: int = 0
    address: str | None = None
    num_cpus: int | None = None
    trials_per_gpu: int | None = None
    benchmark: Literal["auto", "per-gpu", "in-trial"] = "auto"
    runtime: Literal["auto", "local", "ray"] = "auto"
    shapes: tuple[str, ...] | None = None
    stages: bool = False
    search_timeout: float | None = None
    tracking: Literal["mlflow", "log", "none"] = "mlflow"
    validate_top: int | None = None
    validate_repetitions: int | None = None
    simplify_params: bool = False
    transfer_from: Path | None = None
    exhaustive: bool = False
    vendor_controls: tuple[Path, ...] = ()
    quiet: bool = False
    verbose: bool = False
    started: float | None = None

    @property
    def description(self) -> Path:
        """The description of a run of one."""
        return self.descriptions[0]

    @property
    def is_campaign(self) -> bool:
        return len(self.descriptions) > 1 or bool(self.shapes)

    @property
    def evaluations(self) -> int:
        """The budget, once the run has settled it (`with_budget`)."""
        if self.budget is None:
            raise ValueError("`budget`: not settled yet (TuneOptions.with_budget)")
        return self.budget

    def with_budget(self, budget: int) -> TuneOptions:
        return dataclasses.replace(self, budget=budget)


def check_options(options: TuneOptions) -> None:
    """Refuse what a run cannot honour, before Ray or a worker starts.

    Raises:
        CiqTuneError: one line naming the option and the rule it breaks.
    """
    if not options.descriptions:
        raise CiqTuneError("`descriptions`: give at least one kernel description file")
    if options.budget is not None and options.budget < 1:
        raise CiqTuneError(f"`--budget` must be a positive evaluation count, got {options.budget}")
    if options.trials_per_gpu is not None and options.trials_per_gpu < 1:
        raise CiqTuneError(
            f"`--trials-per-gpu` must be a positive integer, got {options.trials_per_gpu}"
        )
    if options.validate_top is not None and options.validate_top < 0:
        raise CiqTuneError(
            f"`--validate-top` must be 0 (off) or a positive count, got {options.validate_top}"
        )
    for name, value, choices in (
        ("runtime", options.runtime, RUNTIMES),
        ("benchmark", options.benchmark, BENCHMARK_MODES),
        ("tracking", options.tracking, TRACKING),
    ):
        if value not in choices:
            raise CiqTuneError(f"`--{name}` must be one of {', '.join(choices)}, got {value!r}")
    check_num_cpus(options.num_cpus)
    several = options.stages or options.is_campaign
    if options.transfer_from is not None and several:
        raise CiqTuneError(
            "`--transfer-from` starts one search of one description: not with --stages, "
            "several descriptions or --shapes"
        )
    if options.exhaustive and several:
        raise CiqTuneError(
            "`--exhaustive` lists one description's space: not with --stages, several "
            "descriptions or --shapes"
        )
    if options.runtime == "local" and several:
        raise CiqTuneError(
            "`--runtime local` runs one description's search (with or without `shapes`): "
            "--stages, several descriptions and --shapes run on Ray (--runtime ray)"
        )
    if options.runtime == "local" and options.address:
        raise CiqTuneError("`--runtime local` runs on this machine: not with --address")


def check_num_cpus(num_cpus: int | None) -> None:
    """`--num-cpus` is at least 1 (a local Ray without CPUs would wait forever)."""
    if num_cpus is not None and num_cpus < 1:
        raise CiqTuneError(
            f"`--num-cpus` must be at least 1 (a local Ray without CPUs runs no trial), got "
            f"{num_cpus}"
        )


def runtime_of(options: TuneOptions) -> str:
    """``local`` or ``ray``: the option, or for ``auto`` Ray when a cluster is named
    (`address`, ``RAY_ADDRESS``), else this machine's worker processes."""
    if options.runtime != "auto":
        return str(options.runtime)
    return "ray" if options.address or os.environ.get("RAY_ADDRESS") else "local"
