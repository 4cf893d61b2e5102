"""`resume`: finish an interrupted run from what its output folder kept (a local run's engine
state, JSON; a Ray run's Tune experiment, pickled), then validate and write its outputs as
`tune` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ciq_tune.errors import CiqTuneError
from ciq_tune.strict_io import FileKind
from ciq_tune.strict_io import load_json
from searchers.run.interrupt import graceful_interrupt
from searchers.run.interrupt import report_interrupted
from searchers.run.interrupt import write_evaluations
from searchers.run.options import TuneOptions
from searchers.run.options import check_num_cpus
from searchers.run.outputs import write_outputs
from searchers.run.setup import RUN_SETTINGS
from searchers.run.setup import SEARCH_STATE
from searchers.run.setup import ray_session
from searchers.run.setup import trial_resources
from searchers.run.setup import with_vendor_files
from searchers.run.single import run_local_search
from searchers.run.validate import served_measure_of
from searchers.run.validate import validate_best
from searchers.run.validate import validation_config

# The search state holds every evaluated configuration (about 1 kB each): a sweep of tens of
# thousands of configurations stays under this (bytes).
MAX_STATE_BYTES = 64 * 1024 * 1024


def resume(
    run_dir: Path,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    trust_pickle: bool = False,
    verbose: bool = False,
    started: float | None = None,
) -> int:
    """Finish the interrupted run in `run_dir` and write its outputs as `tune` does.

    Args:
        run_dir: The output folder of an interrupted `tune`.
        address: A Ray cluster to join (None: as the run had it).
        num_cpus: CPUs of a local Ray or the local workers (None: as the run had it).
        trust_pickle: Restore a run made on Ray, whose Tune experiment is pickled (unpickling
            can run any code: only for a folder you wrote yourself).
        verbose: Trial output and Ray's worker messages printed here.
        started: When the command started (``time.time()``), for the first result's time.

    Returns:
        The exit status, as `searchers.run.tune`'s.

    Raises:
        CiqTuneError: `run_dir` holds no run that resumes, or a file in it breaks a rule.
    """
    from objectives import load_description
    from objectives import make_search_space
    from objectives import starting_points

    settings_path = run_dir / RUN_SETTINGS
    if (run_dir / "campaign.csv").exists() and not settings_path.exists():
        raise CiqTuneError(
            f"`run_dir` {str(run_dir)!r} holds a campaign (campaign.csv); a campaign does "
            "not resume: run `ciq-tune tune` again"
        )
    if not settings_path.exists():
        raise CiqTuneError(
            f"`run_dir` {str(run_dir)!r} has no {RUN_SETTINGS}; give the --out folder of a "
            "`ciq-tune tune` run"
        )
    check_num_cpus(num_cpus)
    settings = load_json(settings_path, FileKind("run settings", error=CiqTuneError))
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
    local = (run_dir / SEARCH_STATE).exists() and not (run_dir / "ray").exists()
    if desc.shapes and not local:
        raise CiqTuneError(
            f"{settings_path}: a multi-shape search (`shapes` in {settings['description']}) "
            "made on Ray does not resume; run `ciq-tune tune` again"
        )
    if local:
        return _resume_locally(run_dir, settings, desc, num_cpus=num_cpus, started=started)
    if not trust_pickle:
        raise CiqTuneError(
            f"`run_dir` {str(run_dir)!r}: a run made on Ray resumes from Ray Tune's "
            "pickled experiment (ray/), and unpickling runs whatever code the files name; "
            "pass --trust-pickle if you wrote this folder yourself"
        )
    # Ray is imported once the arguments and files are known to be good (it takes seconds).
    from ray import tune

    from searchers.compileiq_searcher import CompileIQSearcher
    from searchers.interrupt import interrupt_tune_run
    from searchers.kernel_search import kernel_trainable

    experiment = run_dir.resolve() / "ray" / desc.name
    if not tune.Tuner.can_restore(str(experiment)):
        raise CiqTuneError(f"no Ray Tune experiment to restore in {str(experiment)!r}")
    points = starting_points(desc, make_search_space(desc))
    address = address or settings["address"]
    num_cpus = num_cpus or settings["num_cpus"]
    # A run.json written before validation existed has neither key: use the defaults.
    validate_top = settings.get("validate_top")
    config = validation_config(
        settings.get("validate_repetitions"), settings.get("simplify_params", False)
    )
    # A run.json from before benchmark servers timed in-trial; one from before trials could
    # share a GPU has no trials_per_gpu: one per GPU.
    mode, trials_per_gpu = settings.get("benchmark", "in-trial"), settings.get("trials_per_gpu", 1)
    with (
        ray_session(address, num_cpus, verbose),
        trial_resources(desc.kind, mode, trials_per_gpu) as (pool, placement),
    ):
        trainable = tune.with_resources(kernel_trainable(desc, benchmark=pool), placement.resources)
        with graceful_interrupt(interrupt_tune_run) as interrupt:
            grid = tune.Tuner.restore(str(experiment), trainable).fit()
        searcher = CompileIQSearcher()
        searcher.restore_from_dir(str(experiment))
        write_evaluations(run_dir, searcher.results())
        if interrupt.received:
            return report_interrupted(run_dir, searcher.results())
        measure = None if pool is None else served_measure_of(desc, pool)
        validation = validate_best(
            desc, searcher.results(), points[0], validate_top, config, measure=measure
        )
    return write_outputs(run_dir, desc, searcher.results(), grid, points, validation)


def _resume_locally(
    run_dir: Path,
    settings: dict[str, Any],
    desc: Any,
    *,
    num_cpus: int | None,
    started: float | None,
) -> int:
    """Continue a local run (`tune --runtime local`) from its engine's state: the candidates
    it had handed out first, then new ones to the end of its budget, on this machine's
    workers; then its validation and outputs, as `tune` writes them (a matrix's: each
    evaluation's per-shape values are in the state)."""
    from ciq_tune.engine import Engine
    from ciq_tune.errors import StateError
    from ciq_tune.tracking import TrackingConfig
    from ciq_tune.tracking import background_writer
    from objectives import make_search_space
    from objectives import starting_points
    from searchers.local_search import start_local_workers

    path = run_dir / SEARCH_STATE
    state = load_json(path, FileKind("search state", MAX_STATE_BYTES, CiqTuneError))
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
        settings.get("validate_repetitions"), settings.get("simplify_params", False)
    )
    options = TuneOptions(
        descriptions=(Path(settings["description"]),),
        out=run_dir,
        seed=settings.get("seed", 0),
        tracking=settings.get("tracking", "none"),
        validate_top=settings.get("validate_top"),
        started=started,
    )
    local = start_local_workers(desc.kind, settings.get("benchmark", "auto"), num_cpus)
    try:
        # Evaluations go on into the run's own MLflow store, numbered on from its last.
        with background_writer(
            TrackingConfig(backend=options.tracking), run_dir=run_dir, search_name=desc.name
        ) as writer:
            if desc.shapes:
                from searchers.run.matrix import tune_matrix_description

                return tune_matrix_description(
                    options, desc, config, writer, local, restored=engine
                )
            baseline = starting_points(desc, space)[0]
            return run_local_search(desc, engine, baseline, local, options, config, writer)
    finally:
        local.close()
