"""The `ciq-tune` command line: a registry of subcommands (tune, apply, check, …)."""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ciq_tune.errors import CiqTuneError

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
    parser.add_argument("--vendor-controls", type=Path, action="append", default=[], metavar="PATH")


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
    parser.add_argument("description", type=Path, help="kernel description file (YAML or JSON)")
    parser.add_argument("--budget", type=int, default=50, help="evaluations (default 50)")
    parser.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of a local Ray (default: all)")
    parser.add_argument("--out", type=Path, default=Path("ciq-tune-out"), help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="search seed (default 0)")
    parser.add_argument(
        "--tracking",
        choices=["mlflow", "log", "none"],
        default="mlflow",
        help="record trials in MLflow (an embedded sqlite store in OUT/mlflow.db; view it with "
        "`mlflow ui --backend-store-uri sqlite:///OUT/mlflow.db`), as log lines, or not at all",
    )


def _tune(args: argparse.Namespace) -> int:
    import ray
    from ray import tune

    from ciq_tune.tracking import TrackingConfig
    from objectives import load_description
    from objectives import make_search_space
    from objectives import make_trainable
    from objectives import starting_points
    from searchers.compileiq_searcher import CompileIQSearcher
    from searchers.tracking import tracking_callbacks

    if args.budget < 1:
        raise CiqTuneError(f"`--budget` must be a positive evaluation count, got {args.budget}")
    desc = load_description(args.description)
    space = make_search_space(desc)
    points = starting_points(desc, space)
    searcher = CompileIQSearcher(
        space=space,
        metric=desc.metric,
        mode=desc.mode,
        max_evaluations=args.budget,
        seed=args.seed,
        points_to_evaluate=points,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    _write_run_settings(args)
    ray.init(address=args.address, num_cpus=args.num_cpus, include_dashboard=False)
    try:
        tuner = tune.Tuner(
            make_trainable(desc),
            # Reused actors keep the isolated benchmark worker warm (~4.5 s to start on an H100).
            tune_config=tune.TuneConfig(search_alg=searcher, num_samples=-1, reuse_actors=True),
            run_config=tune.RunConfig(
                name=desc.name,
                storage_path=str(args.out.resolve() / "ray"),
                verbose=0,
                callbacks=tracking_callbacks(
                    TrackingConfig(backend=args.tracking), run_dir=args.out, search_name=desc.name
                ),
            ),
        )
        grid = tuner.fit()
    finally:
        ray.shutdown()
    return _write_outputs(args.out, desc, searcher.results(), grid, points)


def _write_outputs(out: Path, desc: Any, results: Any, grid: Any, points: Sequence[Any]) -> int:
    """The outputs of `tune` (and `resume`): evaluations table, best controls file, summary."""
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
    best_config, best = min(ok, key=lambda cm: sign * cm[1][desc.metric])
    baseline = next((m[desc.metric] for c, m in ok if c == points[0]), None)
    improvement = None
    if baseline:
        improvement = round(100.0 * sign * (baseline - best[desc.metric]) / abs(baseline), 3)
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
        scores=cf.Scores(baseline=baseline, best=best[desc.metric], improvement_pct=improvement),
        gpu=cf.detect_gpu() if desc.kind != "ptx" else None,
    )
    path = cf.write(out / f"{desc.name}.controls.yaml", record)
    print(
        f"{len(rows)} evaluations ({len(ok)} ok); {desc.metric}: baseline {baseline}, best "
        f"{best[desc.metric]} with {json.dumps(best_config)}\nwrote {path}"
    )
    return 0


RUN_SETTINGS = "run.json"
"""The file of a `tune` output folder that lets `resume` rebuild the search."""


def _write_run_settings(args: argparse.Namespace) -> None:
    settings = {
        "description": str(args.description.resolve()),
        "budget": args.budget,
        "seed": args.seed,
        "address": args.address,
        "num_cpus": args.num_cpus,
        "tracking": args.tracking,
    }
    (args.out / RUN_SETTINGS).write_text(json.dumps(settings, indent=2) + "\n")


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
        "compiler controls. The compiler defaults and curated presets are evaluated first; the\n"
        "best configuration is written to OUT/<name>.controls.yaml.\n\n"
        "  ciq-tune tune examples/kernels/ptx/spill.yaml --budget 40 --num-cpus 2\n"
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
            "Compare timings of a baseline and a candidate measured interleaved (ABAB…), one "
            "time in ms per line. Exits 0 when the speedup is KEPT (p < alpha and the CI's lower "
            "bound above --min-speedup), 1 when REJECTED. See docs/validation.md."
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
            "Build PNGs and report.html from a finished run's evaluations table "
            "(RUN_DIR/evaluations.parquet or .csv, written by `ciq-tune tune`)."
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


def _resume(args: argparse.Namespace) -> int:
    import ray
    from ray import tune

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
    ray.init(address=address, num_cpus=num_cpus, include_dashboard=False)
    try:
        grid = tune.Tuner.restore(str(experiment), make_trainable(desc)).fit()
    finally:
        ray.shutdown()
    searcher = CompileIQSearcher()
    searcher.restore_from_dir(str(experiment))
    return _write_outputs(args.run_dir, desc, searcher.results(), grid, points)


register(
    Command(
        "resume",
        "finish an interrupted `ciq-tune tune` run and write its outputs",
        "Restore the Ray Tune experiment of RUN_DIR (the searcher's state included, so the\n"
        "budget is kept and no configuration is evaluated twice), run it to the end and write\n"
        "the same outputs as `tune`: evaluations table and best controls file.\n\n"
        "  ciq-tune resume ciq-tune-out",
        _resume_args,
        _resume,
    )
)


if __name__ == "__main__":
    sys.exit(main())
