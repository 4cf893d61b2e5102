"""`ciq-tune tune` of a description with `shapes`: one search per bucket, with transfer."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.cli._interrupt import graceful_interrupt
from ciq_tune.cli._interrupt import report_kept
from ciq_tune.cli.tune import VALIDATE_TOP
from ciq_tune.cli.tune import place_trials
from ciq_tune.cli.tune import ray_init
from ciq_tune.cli.tune import relative_path
from ciq_tune.cli.tune import write_run_settings
from ciq_tune.errors import CiqTuneError

if TYPE_CHECKING:
    from ray import tune

    from ciq_tune.validation import ValidationConfig
    from objectives.description import KernelDescription
    from searchers.matrix_search import MatrixInterrupted


def tune_matrix_command(
    args: argparse.Namespace, desc: KernelDescription, settings: ValidationConfig
) -> int:
    """Tune every bucket of the matrix and write OUT/<name>.controls.yaml (schema 2, with the
    matrix) and OUT/evaluations-<i>.csv per bucket, in tuning order."""
    import ray

    from ciq_tune.controls import controls_file as cf
    from searchers.interrupt import StopRequested
    from searchers.interrupt import interrupt_tune_run
    from searchers.matrix_search import MatrixInterrupted
    from searchers.matrix_search import MatrixSettings
    from searchers.matrix_search import controls_record
    from searchers.matrix_search import tune_matrix

    if not 0 < args.transfer <= 1:
        raise CiqTuneError(f"`--transfer` must be in (0, 1], got {args.transfer}")
    matrix_settings = MatrixSettings(
        budget=args.budget,
        transfer=None if args.no_transfer else args.transfer,
        seed=args.seed,
        validate_top=VALIDATE_TOP if args.validate_top is None else args.validate_top,
        validation=settings,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    write_run_settings(args)
    started_ray = ray_init(args.address, args.num_cpus, args.verbose)
    try:
        placement = place_trials(desc.kind, args.trials_per_gpu)
        with graceful_interrupt(interrupt_tune_run) as interrupt:
            outcomes = tune_matrix(
                desc,
                matrix_settings,
                placement,
                lambda n: _run_config(args, n, StopRequested(lambda: interrupt.received)),
                proceed=lambda: not interrupt.received,
            )
    except MatrixInterrupted as stopped:
        return _report_interrupted(args, stopped)
    finally:
        if started_ray:
            ray.shutdown()
    for index, outcome in enumerate(outcomes):
        outcome.results.to_csv(args.out / f"evaluations-{index}.csv")
        print(
            f"{outcome.group.label()}: {outcome.evaluations} evaluations; {desc.metric} "
            f"baseline {_fmt(outcome.baseline_values)} -> {_fmt(outcome.winner_values)} "
            f"(search values); validation {outcome.validation.outcome}"
        )
    record = controls_record(desc, outcomes, source=relative_path(desc.source, args.out))
    path = cf.write(args.out / f"{desc.name}.controls.yaml", record)
    total = sum(o.evaluations for o in outcomes)
    print(f"{total} evaluations over {len(outcomes)} buckets; wrote {path}")
    return 0


def _report_interrupted(args: argparse.Namespace, stopped: MatrixInterrupted) -> int:
    """Write the searched buckets' evaluations (OUT/evaluations-<i>.csv, in tuning order, as a
    finished run) and say what was kept; no controls file. Returns 130."""
    for index, (_, results) in enumerate(stopped.searched):
        results.to_csv(args.out / f"evaluations-{index}.csv")
    records = [r for _, results in stopped.searched for r in results.records]
    return report_kept(
        len(records),
        sum(1 for r in records if r.ok),
        f"{args.out / 'evaluations-*.csv'} ({len(stopped.searched)} of {stopped.buckets} "
        "buckets searched; no controls file)",
        "a multi-shape search does not resume: run `ciq-tune tune` again",
    )


def _run_config(args: argparse.Namespace, name: str, stop: tune.Callback) -> tune.RunConfig:
    """A bucket's RunConfig: `tune`'s tracking and the Ctrl+C hand-over (`stop`)."""
    from ray import tune

    from ciq_tune.tracking import TrackingConfig
    from searchers.tracking import tracking_callbacks

    callbacks = tracking_callbacks(
        TrackingConfig(backend=args.tracking), run_dir=args.out, search_name=name
    )
    storage = str(args.out.resolve() / "ray")
    return tune.RunConfig(name=name, storage_path=storage, verbose=0, callbacks=[*callbacks, stop])


def _fmt(values: list[Any]) -> str:
    return "[" + ", ".join("-" if v is None else f"{v:.4g}" for v in values) + "]"
