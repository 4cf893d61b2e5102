"""A staged run (`ciq-tune tune DESCRIPTION --stages`): kernel parameters first, then the
description's compiler controls on the best few parameter sets (`searchers.staged`), with the
outputs of a run of one description."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.errors import CiqTuneError
from searchers.run.interrupt import graceful_interrupt
from searchers.run.interrupt import report_interrupted
from searchers.run.interrupt import write_evaluations
from searchers.run.outputs import write_outputs
from searchers.run.setup import progress_callbacks
from searchers.run.setup import ray_session
from searchers.run.setup import require_gpu_for_cuda
from searchers.run.setup import with_vendor_files
from searchers.run.setup import write_run_settings
from searchers.run.validate import validate_best
from searchers.run.validate import validation_config

if TYPE_CHECKING:
    from ray import tune

    from ciq_tune.validation import SearchValidation
    from objectives.description import KernelDescription
    from searchers.run.options import TuneOptions
    from searchers.staged import StagedRun


def check_staged_options(options: TuneOptions) -> None:
    """`--stages` runs one plain search: refuse what it cannot honour, before Ray starts."""
    if options.is_campaign:
        raise CiqTuneError(
            "`--stages` tunes one description (a campaign of several descriptions or "
            "`--shapes` runs plain searches); give one DESCRIPTION without --shapes"
        )
    if options.search_timeout is not None:
        raise CiqTuneError("`--search-timeout` applies to campaigns, not to `--stages`")
    if options.benchmark == "per-gpu":
        raise CiqTuneError(
            "`--stages` times candidates in each trial's worker: use `--benchmark in-trial` or auto"
        )
    if options.evaluations < 2:
        raise CiqTuneError(
            "`--stages` needs `--budget` >= 2 (one evaluation per stage), got "
            f"{options.evaluations}"
        )


def check_staged_description(desc: KernelDescription) -> None:
    """Both stages need something to search."""
    if not desc.params:
        raise CiqTuneError(
            f"{desc.path}: `params` is empty, so stage 1 of `--stages` has no kernel parameters "
            "to search; drop --stages to search the compiler controls directly"
        )
    if not desc.controls:
        raise CiqTuneError(
            f"{desc.path}: `controls` selects no compiler controls, so stage 2 of `--stages` "
            "has nothing to search; drop --stages to search the parameters alone"
        )
    if desc.shapes:
        raise CiqTuneError(
            f"{desc.path}: a description with `shapes` is tuned per bucket; drop --stages"
        )


def tune_staged(options: TuneOptions) -> int:
    """Run `staged_search` on one description and write `tune`'s outputs (evaluations of both
    stages, origin `stage1_params`/`stage2_controls`), plus a line on what the controls added."""
    from objectives import load_description
    from objectives import make_search_space
    from objectives import measurement_is_exact
    from objectives import starting_points

    check_staged_options(options)
    settings = validation_config(options.validate_repetitions, options.simplify_params)
    desc = with_vendor_files(load_description(options.description), options.vendor_controls)
    check_staged_description(desc)
    # The baseline: stage 1's first point, the parameters' defaults with the compilers' defaults.
    params_desc = desc.model_copy(update={"controls": {}})
    baseline = starting_points(params_desc, make_search_space(params_desc))[0]
    # Ray is imported once the arguments and files are known to be good (it takes seconds).
    import ray

    from searchers.interrupt import StopRequested
    from searchers.interrupt import interrupt_tune_run
    from searchers.kernel_search import NoiseSettings
    from searchers.staged import staged_results
    from searchers.staged import staged_search

    options.out.mkdir(parents=True, exist_ok=True)
    # run.json names the description for `ciq-tune verify`; `resume` refuses a staged run.
    write_run_settings(options)
    # As `_tune`: noise-aware unless a fresh evaluation reproduces the metric exactly; no
    # convergence stop.
    noise = None if measurement_is_exact(desc) else NoiseSettings(patience=0)
    # One progress line over both stages' evaluations (stage 2 gets what stage 1 left).
    progress = progress_callbacks(desc, options.evaluations, options.quiet)
    with ray_session(options.address, options.num_cpus, options.verbose):
        require_gpu_for_cuda(desc.kind, int(ray.cluster_resources().get("GPU", 0)))
        started = time.perf_counter()
        with graceful_interrupt(interrupt_tune_run) as interrupt:
            staged = staged_search(
                desc,
                budget=options.evaluations,
                seed=options.seed,
                run_config=lambda stage: _run_config(
                    options, desc, stage, [*progress, StopRequested(lambda: interrupt.received)]
                ),
                trials_per_gpu=options.trials_per_gpu or 1,
                noise=noise,
                proceed=lambda: not interrupt.received,
            )
        results = staged_results(staged, desc.metric, desc.mode)
        write_evaluations(options.out, results)
        if interrupt.received:
            return report_interrupted(
                options.out, results, "a staged search does not resume: run it again"
            )
        _print_stages(staged, time.perf_counter() - started)
        validation = validate_best(desc, results, baseline, options.validate_top, settings)
    status = write_outputs(options.out, desc, results, None, [baseline], validation)
    print(controls_added(staged, validation, desc.metric, desc.mode))
    return status


def _run_config(
    options: TuneOptions, desc: KernelDescription, stage: str, callbacks: list[Any]
) -> tune.RunConfig:
    """Each stage's RunConfig: `tune`'s tracking (one run per stage), the progress line and the
    Ctrl+C hand-over (`callbacks`)."""
    from ray import tune

    from ciq_tune.tracking import TrackingConfig
    from searchers.tracking import tracking_callbacks

    name = f"{desc.name}_{stage}"
    return tune.RunConfig(
        name=name,
        storage_path=str(options.out.resolve() / "ray"),
        verbose=0,
        callbacks=[
            *tracking_callbacks(
                TrackingConfig(backend=options.tracking), run_dir=options.out, search_name=name
            ),
            *callbacks,
        ],
    )


def _print_stages(staged: StagedRun, wall_s: float) -> None:
    from searchers.placement import format_throughput
    from searchers.placement import search_throughput

    for label, run in (
        ("stage 1 (params)", staged.params),
        ("stage 2 (controls)", staged.controls),
    ):
        if run is None:
            print(f"{label}: not run (no controls to search or no budget left)", flush=True)
            continue
        summary = search_throughput(
            run.trials,
            wall_s=run.wall_s,
            gpus=run.placement.gpus,
            concurrency=run.placement.max_concurrent_trials,
        )
        print(f"{label}: {format_throughput(summary)}", flush=True)
    print(f"staged search: {wall_s:.1f} s in all", flush=True)


def controls_added(staged: StagedRun, validation: SearchValidation, metric: str, mode: str) -> str:
    """One line: stage 2's best over stage 1's best by the search's own values (labelled), and
    re-measured when validation re-measured both against the same baseline.

    The re-measured ratio is speedup(stage 2) / speedup(stage 1), each interleaved with the
    baseline (the two winners were not interleaved with each other); its interval
    [low2 / high1, high2 / low1] holds the true ratio whenever both CIs hold theirs. An interval
    that holds 1 is "nothing beyond noise".
    """
    stage1, stage2 = staged.params.best, None if staged.controls is None else staged.controls.best
    if stage1 is None or stage2 is None:
        return "controls added: not measured (stage 2 did not run or no evaluation succeeded)"
    first, second = float(stage1[metric]), float(stage2[metric])
    searched = first / second if mode == "min" else second / first
    line = (
        f"controls added: stage 2's best / stage 1's best = {searched:.4f} by the search's own "
        f"values ({metric} {first:.4g} -> {second:.4g}; above 1: the controls helped)"
    )
    one = next((c.result for c in validation.candidates if c.config == stage1["config"]), None)
    two = next((c.result for c in validation.candidates if c.config == stage2["config"]), None)
    if one is None or two is None:
        return line + "; not re-measured (validation did not re-measure both stage winners)"
    ratio = two.speedup / one.speedup
    low, high = two.speedup_ci_low / one.speedup_ci_high, two.speedup_ci_high / one.speedup_ci_low
    verdict = "nothing beyond noise" if low <= 1 <= high else ("helped" if low > 1 else "hurt")
    return (
        line + f"; re-measured against the same baseline: {ratio:.4f} "
        f"[{low:.4f}, {high:.4f}] (interval from both speedup CIs): {verdict}"
    )
