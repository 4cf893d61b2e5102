"""`tune`: one run of ciq-tune from its options to its outputs folder, the function that the
CLI (`ciq-tune tune`), the Python API (`ciq_tune.tune_kernel`) and campaigns go through.

A run takes one of five paths: a campaign (several descriptions, or one per shape), staged
controls, a matrix (a description with `shapes`), or one description on this machine's worker
processes or on Ray Tune trials. The checks come first, then the slow starts (workers, the
tracking writer, Ray), each as early as what it needs is known.
"""

from __future__ import annotations

from searchers.run.options import DEFAULT_BUDGET
from searchers.run.options import TuneOptions
from searchers.run.options import check_options
from searchers.run.options import runtime_of
from searchers.run.setup import default_budget
from searchers.run.setup import earlier_search
from searchers.run.setup import local_gpus
from searchers.run.setup import require_gpu_for_cuda
from searchers.run.setup import with_vendor_files
from searchers.run.validate import validation_config


def tune(options: TuneOptions) -> int:
    """Run the search `options` describe and write its outputs in ``options.out``.

    Returns:
        The exit status: 0 done; 1 a campaign search that did not finish; 130 a Ctrl+C
        stopped the run (what finished is written, `ciq-tune resume` goes on where it can).

    Raises:
        CiqTuneError: an option, a file or a field breaks a rule (one line naming it).
    """
    from ciq_tune.errors import CiqTuneError
    from ciq_tune.tracking import TrackingConfig
    from ciq_tune.tracking import background_writer
    from objectives import load_description
    from objectives import make_search_space
    from objectives import starting_points

    check_options(options)
    if options.budget is None and (options.stages or options.is_campaign):
        options = options.with_budget(DEFAULT_BUDGET)
    if options.stages:
        from searchers.run.staged import tune_staged

        return tune_staged(options)
    if options.is_campaign:
        if options.vendor_controls:
            raise CiqTuneError(
                "`--vendor-controls` applies to one description; in a campaign name the file "
                "in each description's `controls.ptxas.vendor_controls_files`"
            )
        from searchers.run.campaign import tune_campaign

        return tune_campaign(options)
    settings = validation_config(options.validate_repetitions, options.simplify_params)
    desc = with_vendor_files(load_description(options.description), options.vendor_controls)
    if options.budget is None:
        options = options.with_budget(default_budget(desc))
    local = None
    if runtime_of(options) == "local":
        # The workers start first: their imports overlap everything until the first compile.
        from searchers.local_search import start_local_workers

        require_gpu_for_cuda(desc.kind, local_gpus())
        local = start_local_workers(desc.kind, options.benchmark, options.num_cpus)
    try:
        space = None if desc.shapes else make_search_space(desc)
        points = [] if space is None else starting_points(desc, space)
        earlier = (
            None if space is None else earlier_search(options.transfer_from, desc, space, points)
        )
        options.out.mkdir(parents=True, exist_ok=True)
        # The MLflow writer starts before Ray (or the engine) is imported and started
        # (seconds), which its own start (importing MLflow, opening the store) overlaps, and
        # finishes its backlog while the run validates and writes the results; it returns
        # once every record is written.
        with background_writer(
            TrackingConfig(backend=options.tracking), run_dir=options.out, search_name=desc.name
        ) as writer:
            if desc.shapes:
                from searchers.run.matrix import tune_matrix_description

                return tune_matrix_description(options, desc, settings, writer, local)
            from searchers.run.single import search_description

            return search_description(
                options, desc, space, points, settings, writer, local, earlier
            )
    finally:
        if local is not None:
            local.close()
