"""`ciq-tune resume`: finish an interrupted `tune` run and write its outputs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.cli._interrupt import graceful_interrupt
from ciq_tune.cli._interrupt import report_interrupted
from ciq_tune.cli._interrupt import write_evaluations
from ciq_tune.cli._options import add_verbose
from ciq_tune.cli._outputs import write_outputs
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register
from ciq_tune.cli._run import RUN_SETTINGS
from ciq_tune.cli._run import SEARCH_STATE
from ciq_tune.cli._run import benchmark_pool
from ciq_tune.cli._run import check_num_cpus
from ciq_tune.cli._run import place_trials
from ciq_tune.cli._run import ray_init
from ciq_tune.cli._run import run_local_search
from ciq_tune.cli._run import served_measure_of
from ciq_tune.cli._run import validate_best
from ciq_tune.cli._run import validation_config
from ciq_tune.cli._run import with_vendor_files
from ciq_tune.errors import CiqTuneError
from ciq_tune.strict_io import load_json

# The search state holds every evaluated configuration (about 1 kB each): a sweep of tens of
# thousands of configurations stays under this (bytes).
MAX_STATE_BYTES = 64 * 1024 * 1024

if TYPE_CHECKING:
    pass


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
    from ciq_tune.validation import VALIDATION_DEFAULTS
    from objectives import load_description
    from objectives import make_search_space
    from objectives import starting_points

    settings_path = args.run_dir / RUN_SETTINGS
    if (args.run_dir / "campaign.csv").exists() and not settings_path.exists():
        raise CiqTuneError(
            f"`run_dir` {str(args.run_dir)!r} holds a campaign (campaign.csv); a campaign does "
            "not resume: run `ciq-tune tune` again"
        )
    if not settings_path.exists():
        raise CiqTuneError(
            f"`run_dir` {str(args.run_dir)!r} has no {RUN_SETTINGS}; give the --out folder of a "
            "`ciq-tune tune` run"
        )
    check_num_cpus(args.num_cpus)
    settings = load_json(settings_path, what="run settings", error=CiqTuneError)
    if not isinstance(settings, dict) or not isinstance(settings.get("description"), str):
        raise CiqTuneError(
            f"{settings_path}: field `description`: missing; not a run.json written by "
            "`ciq-tune tune`"
        )
    if settings.get("stages"):
        raise CiqTuneError(
            f"{settings_path}: a staged search (`tune --stages`) does not resume; run it again"
        )
    # A run.json from before `--vendor-controls` has no such key.
    vendor = [Path(f) for f in settings.get("vendor_controls", [])]
    desc = with_vendor_files(load_description(settings["description"]), vendor)
    local = (args.run_dir / SEARCH_STATE).exists() and not (args.run_dir / "ray").exists()
    if desc.shapes and not local:
        raise CiqTuneError(
            f"{settings_path}: a multi-shape search (`shapes` in {settings['description']}) "
            "made on Ray does not resume; run `ciq-tune tune` again"
        )
    if local:
        return _resume_locally(args, settings, desc)
    if not args.trust_pickle:
        raise CiqTuneError(
            f"`run_dir` {str(args.run_dir)!r}: a run made on Ray resumes from Ray Tune's "
            "pickled experiment (ray/), and unpickling runs whatever code the files name; "
            "pass --trust-pickle if you wrote this folder yourself"
        )
    # Ray is imported once the arguments and files are known to be good (it takes seconds).
    import ray
    from ray import tune

    from searchers.compileiq_searcher import CompileIQSearcher
    from searchers.interrupt import interrupt_tune_run
    from searchers.kernel_search import kernel_trainable

    experiment = args.run_dir.resolve() / "ray" / desc.name
    if not tune.Tuner.can_restore(str(experiment)):
        raise CiqTuneError(f"no Ray Tune experiment to restore in {str(experiment)!r}")
    points = starting_points(desc, make_search_space(desc))
    address = args.address or settings["address"]
    num_cpus = args.num_cpus or settings["num_cpus"]
    # A run.json written before validation existed has neither key: use the defaults.
    validate_top = settings.get("validate_top")
    config = validation_config(
        settings.get("validate_repetitions", VALIDATION_DEFAULTS["repetitions"]),
        settings.get("simplify_params", VALIDATION_DEFAULTS["simplify_params"]),
    )
    started_ray = ray_init(address, num_cpus, args.verbose)
    pool = None
    try:
        # A run.json from before trials could share a GPU has no trials_per_gpu: one per GPU.
        # A run.json from before benchmark servers timed in-trial.
        pool = benchmark_pool(desc.kind, settings.get("benchmark", "in-trial"))
        placement = place_trials(
            desc.kind, settings.get("trials_per_gpu", 1), staged=pool is not None
        )
        trainable = tune.with_resources(kernel_trainable(desc, benchmark=pool), placement.resources)
        with graceful_interrupt(interrupt_tune_run) as interrupt:
            grid = tune.Tuner.restore(str(experiment), trainable).fit()
        searcher = CompileIQSearcher()
        searcher.restore_from_dir(str(experiment))
        write_evaluations(args.run_dir, searcher.results())
        if interrupt.received:
            return report_interrupted(args.run_dir, searcher.results())
        measure = None if pool is None else served_measure_of(desc, pool)
        validation = validate_best(
            desc, searcher.results(), points[0], validate_top, config, measure=measure
        )
    finally:
        if pool is not None:
            pool.shutdown()
        if started_ray:
            ray.shutdown()
    return write_outputs(args.run_dir, desc, searcher.results(), grid, points, validation)


def _resume_locally(args: argparse.Namespace, settings: dict[str, Any], desc: Any) -> int:
    """Continue a local run (`tune --runtime local`) from its engine's state: the candidates
    it had handed out first, then new ones to the end of its budget, on this machine's
    workers; then its validation and outputs, as `tune` writes them (a matrix's: each
    evaluation's per-shape values are in the state)."""
    from ciq_tune.engine import Engine
    from ciq_tune.errors import StateError
    from ciq_tune.tracking import TrackingConfig
    from ciq_tune.tracking import background_writer
    from ciq_tune.validation import VALIDATION_DEFAULTS
    from objectives import make_search_space
    from objectives import starting_points
    from searchers.local_search import start_local_workers

    path = args.run_dir / SEARCH_STATE
    state = load_json(path, what="search state", max_bytes=MAX_STATE_BYTES, error=CiqTuneError)
    space = make_search_space(desc.at_shape(desc.matrix()[0]) if desc.shapes else desc)
    if not isinstance(state, dict) or state.get("space") != json.loads(json.dumps(space.to_dict())):
        raise CiqTuneError(
            f"{path}: field `space`: not the space of {settings['description']} (the "
            "description changed since the run, or this is not a search state); run `ciq-tune "
            "tune` again"
        )
    try:
        engine = Engine.from_state(state, space=space)
    except (StateError, KeyError, TypeError, ValueError) as exc:
        raise CiqTuneError(f"{path}: not a search state this version reads: {exc}") from exc
    config = validation_config(
        settings.get("validate_repetitions", VALIDATION_DEFAULTS["repetitions"]),
        settings.get("simplify_params", VALIDATION_DEFAULTS["simplify_params"]),
    )
    args.quiet = False
    args.tracking = settings.get("tracking", "none")
    args.validate_top = settings.get("validate_top")
    args.seed, args.out = settings.get("seed", 0), args.run_dir
    local = start_local_workers(desc.kind, settings.get("benchmark", "auto"), args.num_cpus)
    try:
        # Evaluations go on into the run's own MLflow store, numbered on from its last.
        with background_writer(
            TrackingConfig(backend=args.tracking), run_dir=args.run_dir, search_name=desc.name
        ) as writer:
            if desc.shapes:
                from ciq_tune.cli._matrix import tune_matrix_command

                return tune_matrix_command(args, desc, config, writer, local, restored=engine)
            baseline = starting_points(desc, space)[0]
            return run_local_search(
                args.run_dir, desc, engine, baseline, local, args, config, writer
            )
    finally:
        local.close()


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
