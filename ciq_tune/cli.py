"""The `ciq-tune` command line: a registry of subcommands (tune, apply, check, …)."""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.errors import CiqTuneError

if TYPE_CHECKING:
    from ciq_tune.validation import SearchValidation
    from ciq_tune.validation import ValidationConfig
    from searchers.placement import Placement

Handler = Callable[[argparse.Namespace], int]
Configure = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, long description, arguments and handler."""

    name: str
    help: str
    description: str
    configure: Configure
    run: Handler


COMMANDS: dict[str, Command] = {}


def register(cmd: Command) -> None:
    """Add a subcommand (a later registration of the same name replaces the earlier one)."""
    COMMANDS[cmd.name] = cmd


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command."""
    parser = argparse.ArgumentParser(
        prog="ciq-tune",
        description=(
            "Tune GPU kernels and their compiler controls with Ray Tune. A kernel is given by a "
            "description file (docs/kernel-description.md); the tuned controls are written to a "
            "reviewable controls file (docs/controls-file.md)."
        ),
        epilog="Example: ciq-tune tune examples/kernels/ptx/spill.yaml --budget 40",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for cmd in COMMANDS.values():
        child = sub.add_parser(
            cmd.name,
            help=cmd.help,
            description=cmd.description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        cmd.configure(child)
        child.set_defaults(handler=cmd.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `ciq-tune`; returns the exit status (errors: 2 with the message)."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.handler(args)
    except CiqTuneError as exc:
        print(f"ciq-tune {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return status


# -- apply ---------------------------------------------------------------------------------------
def _apply_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="controls file (YAML)")
    parser.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text: one line per compiler, shell-quoted for reading; json: lists/objects",
    )
    _add_vendor_controls(parser)


def _add_vendor_controls(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vendor-controls",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="allow the file to pass this vendor controls file to ptxas (repeatable)",
    )


def _apply(args: argparse.Namespace) -> int:
    from ciq_tune.controls import controls_file as cf

    loaded = cf.load(args.file)
    rendered = cf.render(loaded, vendor_controls_files=args.vendor_controls)
    if args.format == "json":
        print(json.dumps({"params": loaded.params, **rendered}, indent=2))
        return 0
    for name, value in rendered.items():
        text = shlex.join(value) if isinstance(value, list) else json.dumps(value)
        print(f"{name}: {text}")
    if loaded.params:
        print(f"params: {json.dumps(loaded.params)}")
    return 0


register(
    Command(
        "apply",
        "print the compiler arguments (or Triton kwargs) of a controls file",
        "Re-validate a controls file against the installed compilers and print what to pass:\n"
        "argument lists for ptxas/nvcc, keyword arguments for a Triton launch. A file naming an\n"
        "option the catalog does not offer, a disallowed value or a path is rejected.\n\n"
        "  ciq-tune apply spill.controls.yaml\n"
        "  ptxas $(ciq-tune apply spill.controls.yaml --format json | jq -r '.ptxas[]') …",
        _apply_args,
        _apply,
    )
)


# -- check ---------------------------------------------------------------------------------------
def _check_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="controls file (YAML)")
    parser.add_argument(
        "--description",
        type=Path,
        help="kernel description: also compare the kernel source hash and arch",
    )
    parser.add_argument(
        "--ignore-gpu", action="store_true", help="do not compare the GPU (compile-only CI)"
    )
    _add_vendor_controls(parser)


def _check(args: argparse.Namespace) -> int:
    from ciq_tune.controls import controls_file as cf
    from objectives.description import load_description

    loaded = cf.load(args.file)
    source: Path | None = None
    arch = None
    if args.description is not None:
        desc = load_description(args.description)
        source, arch = desc.source, desc.arch
    else:
        recorded = Path(loaded.kernel.source)
        candidate = recorded if recorded.is_absolute() else args.file.parent / recorded
        source = candidate if candidate.is_file() else None
    reasons = cf.check(
        loaded,
        source=source,
        arch=arch,
        check_gpu=not args.ignore_gpu,
        vendor_controls_files=args.vendor_controls,
    )
    if reasons:
        for reason in reasons:
            print(f"MISMATCH: {reason}")
        return 1
    what = ["kernel source"] if source is not None else []
    what += ["toolchain"] + ([] if args.ignore_gpu else ["GPU"])
    print(f"OK: {args.file} matches this {', '.join(what)}")
    return 0


register(
    Command(
        "check",
        "exit non-zero when a controls file no longer matches toolchain, GPU or kernel",
        "For CI: compare a controls file with the installed compilers (versions and options),\n"
        "the GPU and the kernel source. Prints one MISMATCH line per reason and exits 1, or OK\n"
        "and 0.\n\n"
        "  ciq-tune check spill.controls.yaml --description examples/kernels/ptx/spill.yaml",
        _check_args,
        _check,
    )
)


# -- tune ----------------------------------------------------------------------------------------
def _tune_args(parser: argparse.ArgumentParser) -> None:
    from ciq_tune.validation import VALIDATION_DEFAULTS

    parser.add_argument("description", type=Path, help="kernel description file (YAML or JSON)")
    parser.add_argument("--budget", type=int, default=50, help="evaluations (default 50)")
    parser.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of a local Ray (default: all)")
    parser.add_argument(
        "--trials-per-gpu",
        type=int,
        default=1,
        metavar="N",
        help="trials sharing each GPU: they compile at the same time and take turns to "
        "benchmark (default 1: one trial per GPU)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("ciq-tune-out"), help="output folder (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="search seed (default 0)")
    parser.add_argument(
        "--tracking",
        choices=["mlflow", "log", "none"],
        default="mlflow",
        help="record trials in MLflow (an embedded sqlite store in OUT/mlflow.db; view it with "
        "`mlflow ui --backend-store-uri sqlite:///OUT/mlflow.db`), as log lines, or not at all",
    )
    parser.add_argument(
        "--validate-top",
        type=int,
        metavar="K",
        help="after the search, re-measure the K best distinct configurations interleaved with "
        f"the baseline and write the best KEPT one, or the baseline (default {VALIDATE_TOP}; "
        "skipped for PTX compile statistics, which a recompile reproduces exactly; 0: off)",
    )
    parser.add_argument(
        "--validate-repetitions",
        type=int,
        default=VALIDATION_DEFAULTS["repetitions"],
        metavar="N",
        help="timed repetitions of each side per candidate (default %(default)s)",
    )
    _add_verbose(parser)


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also print every trial's output and Ray's worker messages here (default: quiet; "
        "they stay in Ray's logs: the trial actors' STDOUT in the dashboard of a cluster, see "
        "docs/cluster.md, or /tmp/ray/session_latest/logs/worker-*.out for a local Ray)",
    )


def _ray_init(address: str | None, num_cpus: int | None, verbose: bool) -> None:
    """Start or join Ray for `tune`/`resume`."""
    import ray

    # Forwarding worker output prints each trial's lines and, at shutdown, the tracebacks of
    # actors Ray ends with SIGTERM; only on request.
    ray.init(address=address, num_cpus=num_cpus, include_dashboard=False, log_to_driver=verbose)


VALIDATE_TOP = 3
"""Candidates `tune` re-measures against the baseline at the end, unless told otherwise."""


def _tune(args: argparse.Namespace) -> int:
    import ray
    from ray import tune

    from ciq_tune.tracking import TrackingConfig
    from objectives import load_description
    from objectives import make_search_space
    from objectives import make_trainable
    from objectives import starting_points
    from searchers.kernel_search import kernel_tuner
    from searchers.tracking import tracking_callbacks

    if args.budget < 1:
        raise CiqTuneError(f"`--budget` must be a positive evaluation count, got {args.budget}")
    if args.trials_per_gpu < 1:
        raise CiqTuneError(
            f"`--trials-per-gpu` must be a positive integer, got {args.trials_per_gpu}"
        )
    settings = _validation_config(args.validate_repetitions)
    desc = load_description(args.description)
    space = make_search_space(desc)
    points = starting_points(desc, space)
    args.out.mkdir(parents=True, exist_ok=True)
    _write_run_settings(args)
    _ray_init(args.address, args.num_cpus, args.verbose)
    try:
        placement = _placement(desc.kind, args.trials_per_gpu)
        tuner, searcher = kernel_tuner(
            make_trainable(desc),
            placement,
            space=space,
            metric=desc.metric,
            mode=desc.mode,
            max_evaluations=args.budget,
            seed=args.seed,
            points_to_evaluate=points,
            run_config=tune.RunConfig(
                name=desc.name,
                storage_path=str(args.out.resolve() / "ray"),
                verbose=0,
                callbacks=tracking_callbacks(
                    TrackingConfig(backend=args.tracking), run_dir=args.out, search_name=desc.name
                ),
            ),
        )
        started = time.perf_counter()
        grid = tuner.fit()
        _print_throughput(grid, time.perf_counter() - started, placement)
        validation = _validate_top(desc, searcher.results(), points[0], args.validate_top, settings)
    finally:
        ray.shutdown()
    return _write_outputs(args.out, desc, searcher.results(), grid, points, validation)


def _validation_config(repetitions: int) -> ValidationConfig:
    from pydantic import ValidationError

    from ciq_tune.validation import ValidationConfig

    try:
        return ValidationConfig(repetitions=repetitions)
    except ValidationError as exc:
        raise CiqTuneError(
            f"`--validate-repetitions`={repetitions}: {exc.errors()[0]['msg']}"
        ) from exc


def _validate_top(
    desc: Any, results: Any, baseline: Any, top_k: int | None, settings: ValidationConfig
) -> SearchValidation:
    """Re-measure the search's top-k against the baseline in a Ray task (while Ray is up), or
    say why not."""
    import ray

    from ciq_tune.validation import SearchValidation
    from ciq_tune.validation import validate_search
    from objectives import make_measure
    from objectives import measurement_is_exact

    k = VALIDATE_TOP if top_k is None else top_k
    skip = None
    if measurement_is_exact(desc):
        skip = (
            f"{desc.metric} is a compile statistic that a fresh ptxas run reproduces exactly "
            "(same PTX, options and ptxas version, all recorded here): no noise to test"
        )
    elif k < 1:
        skip = f"switched off (--validate-top {k})"
    elif not any(r.ok and r.config == baseline for r in results.records):
        skip = "the baseline did not run successfully, so there is nothing to compare with"
    if skip is not None:
        return SearchValidation(outcome="skipped", reason=skip, top_k=k, baseline_config=baseline)
    # A timed kind needs a GPU: on a cluster with GPUs the task asks for one, so it lands on a
    # GPU node and (the search being over) has that GPU to itself.
    gpus = 1 if desc.kind != "ptx" and ray.cluster_resources().get("GPU", 0) >= 1 else 0
    print(
        f"validating the top {k} against the baseline: {settings.warmup} warm-up and "
        f"{settings.repetitions} timed interleaved repetitions each …",
        flush=True,
    )
    measure = make_measure(desc)

    def validate_top() -> SearchValidation:
        return validate_search(results, measure, baseline, k=k, config=settings)

    validation: SearchValidation = ray.get(
        ray.remote(num_cpus=1, num_gpus=gpus)(validate_top).remote()
    )
    return validation


def _write_outputs(
    out: Path,
    desc: Any,
    results: Any,
    grid: Any,
    points: Sequence[Any],
    validation: SearchValidation,
) -> int:
    """The outputs of `tune` (and `resume`): evaluations table, controls file of the validated
    winner (the search's best when validation was skipped), validation.json, summary."""
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.controls.controls_file import installed_catalog

    # Every evaluation, failures included, for `ciq-tune report` and for review.
    results.to_parquet(out / "evaluations.parquet")
    results.to_csv(out / "evaluations.csv")
    rows = [(grid[i].config or {}, grid[i].metrics or {}) for i in range(len(grid))]
    ok = [(c, m) for c, m in rows if m.get("status") == "ok" and _finite(m.get(desc.metric))]
    if not ok:
        raise CiqTuneError(f"no candidate of {len(rows)} compiled and ran; see {out}/ray")
    sign = 1 if desc.mode == "min" else -1
    best_config, best_metrics = min(ok, key=lambda cm: sign * cm[1][desc.metric])
    best = best_metrics[desc.metric]
    baseline = next((m[desc.metric] for c, m in ok if c == points[0]), None)
    if validation.winner is not None:
        best_config, best = validation.winner.config, validation.winner.search_values[desc.metric]
    elif validation.outcome == "baseline" and baseline is not None:
        best_config, best = points[0], baseline
    improvement = None
    if baseline:
        improvement = round(100.0 * sign * (baseline - best) / abs(baseline), 3)
    names = list(best_config.get("controls", {}))
    catalogs = {n: installed_catalog(n, desc.arch) for n in names}
    record = cf.build(
        kernel=cf.KernelInfo(
            name=desc.name,
            kind=desc.kind,
            source=_relative(desc.source, out),
            source_sha256=desc.source_sha256(),
            entry=desc.entry,
            arch=desc.arch,
        ),
        catalogs=catalogs,
        controls=best_config.get("controls", {}),
        params=best_config.get("params", {}),
        benchmark=cf.Benchmark(
            metric=desc.metric,
            mode=desc.mode,
            sizes=desc.sizes,
            shapes={i.name: list(desc.shape_of(i)) for i in desc.inputs},
            dtypes={i.name: i.dtype for i in desc.inputs},
        ),
        scores=cf.Scores(baseline=baseline, best=best, improvement_pct=improvement),
        gpu=cf.detect_gpu() if desc.kind != "ptx" else None,
        validation=validation.to_dict(),
    )
    path = cf.write(out / f"{desc.name}.controls.yaml", record)
    (out / VALIDATION_FILE).write_text(json.dumps(validation.to_dict(), indent=2) + "\n")
    print(
        f"{len(rows)} evaluations ({len(ok)} ok); {desc.metric}: baseline {baseline}, best "
        f"{best_metrics[desc.metric]}\n{validation.summary()}\n"
        f"wrote {path} ({desc.metric} {best} with {json.dumps(best_config)})"
    )
    return 0


RUN_SETTINGS = "run.json"
"""The file of a `tune` output folder that lets `resume` rebuild the search."""
VALIDATION_FILE = "validation.json"
"""The end-of-search validation of a `tune` output folder (`ciq-tune report` shows it)."""


def _write_run_settings(args: argparse.Namespace) -> None:
    settings = {
        "description": str(args.description.resolve()),
        "budget": args.budget,
        "seed": args.seed,
        "address": args.address,
        "num_cpus": args.num_cpus,
        "tracking": args.tracking,
        "trials_per_gpu": args.trials_per_gpu,
        "validate_top": args.validate_top,
        "validate_repetitions": args.validate_repetitions,
    }
    (args.out / RUN_SETTINGS).write_text(json.dumps(settings, indent=2) + "\n")


def _placement(kind: str, trials_per_gpu: int) -> Placement:
    """Trial resources on the Ray cluster that `ray.init` connected to, printed."""
    from searchers.kernel_search import placement_on_cluster

    placement = placement_on_cluster(kind, trials_per_gpu)
    print(f"placement: {placement.note}", flush=True)
    return placement


def _print_throughput(grid: Any, wall_s: float, placement: Placement) -> None:
    """Evaluations per second, GPU busy fraction and time per phase of the finished search."""
    from searchers.placement import format_throughput
    from searchers.placement import search_throughput

    trials = [grid[i].metrics or {} for i in range(len(grid))]
    summary = search_throughput(
        trials,
        wall_s=wall_s,
        gpus=placement.gpus,
        concurrency=placement.max_concurrent_trials,
    )
    print(format_throughput(summary), flush=True)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _relative(path: Path, start: Path) -> str:
    """`path` relative to `start` when possible (the controls file stays movable with it)."""
    return os.path.relpath(path.resolve(), start.resolve())


register(
    Command(
        "tune",
        "search kernel parameters and compiler controls; write the best controls file",
        "Run a Ray Tune search with CompileIQSearcher over the description's parameters and\n"
        "compiler controls. The compiler defaults and curated presets are evaluated first. At\n"
        "the end the K best configurations are re-measured interleaved with the defaults (the\n"
        "baseline; Welch's t, bootstrap CI, KEPT/REJECTED, see docs/validation.md); the best\n"
        "KEPT one, or the baseline when none is kept, is written to OUT/<name>.controls.yaml\n"
        "with the statistics. OUT also gets evaluations.parquet/.csv and validation.json.\n\n"
        "  ciq-tune tune examples/kernels/ptx/spill.yaml --budget 40 --num-cpus 2\n"
        "  ciq-tune tune examples/kernels/triton/matmul.yaml --budget 200 --validate-top 5\n"
        "  ciq-tune tune kernel.yaml --address ray://head:10001 --out results/",
        _tune_args,
        _tune,
    )
)


def _validate(args: argparse.Namespace) -> int:
    from ciq_tune.validation import validate_main

    return validate_main(args)


def _validate_args(parser: argparse.ArgumentParser) -> None:
    from ciq_tune.validation import add_validate_arguments

    add_validate_arguments(parser)


def _report(args: argparse.Namespace) -> int:
    from ciq_tune.report import report_main

    return report_main(args)


def _report_args(parser: argparse.ArgumentParser) -> None:
    from ciq_tune.report import add_report_arguments

    add_report_arguments(parser)


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
register(
    Command(
        name="report",
        help="plots and one HTML page (convergence, Pareto front, parameter importance)",
        description=(
            "Build PNGs and one self-contained report.html from a finished run's evaluations\n"
            "table (RUN_DIR/evaluations.parquet or .csv, written by `ciq-tune tune`):\n"
            "convergence, Pareto front (2-3 objectives), parameter importance and, when the run\n"
            "has validation.json, the re-measured top K. Written to RUN_DIR/report/.\n\n"
            "  ciq-tune report ciq-tune-out\n"
            "  ciq-tune report runs/demo --objective time_ms:min --objective energy_mj:min"
        ),
        configure=_report_args,
        run=_report,
    )
)


# -- sample --------------------------------------------------------------------------------------
def _sample_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("description", type=Path, help="kernel description file (YAML or JSON)")
    parser.add_argument("-n", type=int, default=5, help="configurations to print (default 5)")
    parser.add_argument("--seed", type=int, help="sampling seed (default: unseeded)")


def _sample(args: argparse.Namespace) -> int:
    from objectives import load_description
    from objectives import make_search_space

    if args.n < 1:
        raise CiqTuneError(f"`-n` must be a positive number of configurations, got {args.n}")
    space = make_search_space(load_description(args.description))
    for config in space.sample(args.n, seed=args.seed):
        print(json.dumps(config, sort_keys=True))
    return 0


register(
    Command(
        "sample",
        "print random configurations of a kernel description's search space",
        "Draw N distinct feasible configurations of the description's parameters and compiler\n"
        "controls, one JSON object per line, exactly as a trainable receives them (nothing is\n"
        "compiled or run).\n\n"
        "  ciq-tune sample examples/kernels/ptx/spill.yaml -n 3 --seed 0",
        _sample_args,
        _sample,
    )
)


# -- resume --------------------------------------------------------------------------------------
def _resume_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="output folder of an interrupted `tune`")
    parser.add_argument("--address", help="Ray cluster address (default: as the run had it)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of a local Ray (default: as before)")
    _add_verbose(parser)


def _resume(args: argparse.Namespace) -> int:
    import ray
    from ray import tune

    from ciq_tune.validation import VALIDATION_DEFAULTS
    from objectives import load_description
    from objectives import make_search_space
    from objectives import make_trainable
    from objectives import starting_points
    from searchers.compileiq_searcher import CompileIQSearcher

    settings_path = args.run_dir / RUN_SETTINGS
    if not settings_path.is_file():
        raise CiqTuneError(
            f"`run_dir` {str(args.run_dir)!r} has no {RUN_SETTINGS}; give the --out folder of a "
            "`ciq-tune tune` run"
        )
    settings = json.loads(settings_path.read_text())
    desc = load_description(settings["description"])
    experiment = args.run_dir.resolve() / "ray" / desc.name
    if not tune.Tuner.can_restore(str(experiment)):
        raise CiqTuneError(f"no Ray Tune experiment to restore in {str(experiment)!r}")
    points = starting_points(desc, make_search_space(desc))
    address = args.address or settings["address"]
    num_cpus = args.num_cpus or settings["num_cpus"]
    # A run.json written before validation existed has neither key: use the defaults.
    validate_top = settings.get("validate_top")
    config = _validation_config(
        settings.get("validate_repetitions", VALIDATION_DEFAULTS["repetitions"])
    )
    _ray_init(address, num_cpus, args.verbose)
    try:
        # A run.json from before trials could share a GPU has no trials_per_gpu: one per GPU.
        placement = _placement(desc.kind, settings.get("trials_per_gpu", 1))
        trainable = tune.with_resources(make_trainable(desc), placement.resources)
        grid = tune.Tuner.restore(str(experiment), trainable).fit()
        searcher = CompileIQSearcher()
        searcher.restore_from_dir(str(experiment))
        validation = _validate_top(desc, searcher.results(), points[0], validate_top, config)
    finally:
        ray.shutdown()
    return _write_outputs(args.run_dir, desc, searcher.results(), grid, points, validation)


register(
    Command(
        "resume",
        "finish an interrupted `ciq-tune tune` run and write its outputs",
        "Restore the Ray Tune experiment of RUN_DIR (the searcher's state included, so the\n"
        "budget is kept and no configuration is evaluated twice), run it to the end, validate\n"
        "the top K as the run was told to, and write the same outputs as `tune`: evaluations\n"
        "table, controls file and validation.json.\n\n"
        "  ciq-tune resume ciq-tune-out",
        _resume_args,
        _resume,
    )
)


if __name__ == "__main__":
    sys.exit(main())
