"""One kernel of the GPU suite: default, ciq-tune, @triton.autotune and the vendor library.

    python3 -m bench.gpu_suite --kernel matmul --evals 100 --out "$OUT"
    python3 -m bench.gpu_suite --kernel softmax --dry-run --out /tmp/suite   # CPU, plumbing

Steps, each guarded (a failure is recorded and the next step still runs); OUT/<kernel>.json is
rewritten after every step, so a part cut short still leaves what it measured:

1. search: ciq-tune's search (Ray Tune + CompileIQSearcher, the description's starting
   points first) for --evals evaluations with --trials-per-gpu trials sharing each GPU:
   evals/s, GPU busy fraction (seconds the trials held the GPU lock over the wall time, and
   NVML's utilisation sampled every 0.1 s) and the time per evaluation by phase.
2. autotune: the kernel module's `autotune_configs()` through `@triton.autotune` (Triton
   kernels), with a cold Triton cache like the search's; its wall time and choice.
3. remeasure: the default configuration, ciq-tune's best, autotune's choice and the vendor
   library (the description's `alternative`), re-measured by `objectives.remeasure`: each
   checked on fresh inputs, then interleaved rounds of the search's measurement protocol
   (order rotated every round) while holding the GPU; every comparison with ciq-tune's best
   gets the paired statistics of `ciq_tune.validation.compare_samples`.

Writes OUT/<kernel>.json and OUT/<kernel>.md (a markdown table fragment). --dry-run runs the
same steps on a CPU: Triton's interpreter at tiny sizes, host-clock timings, 3 evaluations.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# CompileIQ's published nvcc reduction search: 150 evaluations in 9 min 29 s.
COMPILEIQ_EVALS_PER_S = 150 / (9 * 60 + 29)
# "Within 3 % of the vendor library": tuned time <= 1.03 x vendor time.
WITHIN = 1.03
# Seed of the inputs of @triton.autotune's step.
AUTOTUNE_SEED = 4243


@dataclass(frozen=True)
class SuiteKernel:
    """One row group of the suite.

    Attributes:
        description: Kernel description, relative to the repository.
        vendor_name: What the vendor row is called in the table.
        work: Expression over the sizes: FLOP (``unit`` TFLOP/s) or bytes moved (GB/s).
        unit: ``"TFLOP/s"`` or ``"GB/s"``.
        dry_sizes: Sizes of the --dry-run (the interpreter is slow).
    """

    description: str
    vendor_name: str
    work: str
    unit: str
    dry_sizes: dict[str, int]


KERNELS: dict[str, SuiteKernel] = {
    "matmul": SuiteKernel(
        "examples/kernels/triton/matmul_persistent.yaml",
        "cuBLAS (torch.matmul)",
        "2 * M * N * K",
        "TFLOP/s",
        {"M": 192, "N": 160, "K": 96, "NUM_SMS": 3},
    ),
    "matmul_tiled": SuiteKernel(
        "examples/kernels/triton/matmul.yaml",
        "cuBLAS (torch.matmul)",
        "2 * M * N * K",
        "TFLOP/s",
        {"M": 96, "N": 80, "K": 112},
    ),
    "softmax": SuiteKernel(
        "examples/kernels/triton/softmax.yaml",
        "torch.softmax",
        "2 * M * N * 2",
        "GB/s",
        {"M": 37, "N": 100, "BLOCK_N": 128, "NUM_SMS": 3},
    ),
    "layer_norm": SuiteKernel(
        "examples/kernels/triton/layer_norm.yaml",
        "torch layer_norm",
        "2 * M * N * 2 + 2 * N * 2",
        "GB/s",
        {"M": 9, "N": 1500},
    ),
    "attention": SuiteKernel(
        "examples/kernels/triton/attention.yaml",
        "torch SDPA",
        "4 * Z * H * N_CTX * N_CTX * HEAD_DIM",
        "TFLOP/s",
        {"Z": 1, "H": 2, "N_CTX": 256, "HEAD_DIM": 64},
    ),
    "row_sum": SuiteKernel(
        "examples/kernels/cuda/row_sum.yaml",
        "torch.sum",
        "R * C * 4",
        "GB/s",
        {"R": 64, "C": 256},
    ),
}


def log(message: str) -> None:
    """A timestamped line on stdout (the shell driver appends it to OUT/suite.log)."""
    print(f"[suite {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Report:
    """The JSON record of one kernel, written (atomically) after every step."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data
        self.data.setdefault("errors", [])

    def save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=_json_default) + "\n")
        os.replace(tmp, self.path)

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run one step; record its result under `name`, or its error, then save."""
        log(f"{name}: start")
        t0 = time.perf_counter()
        try:
            result = fn()
        except Exception as exc:  # a failed step is recorded; the next step still runs
            log(f"{name}: FAILED: {type(exc).__name__}: {exc}")
            self.data["errors"].append(
                {
                    "step": name,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-4000:],
                }
            )
            result = None
        else:
            self.data[name] = result
            log(f"{name}: done in {time.perf_counter() - t0:.1f} s")
        self.save()
        return result


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return repr(value)


# -- setup ---------------------------------------------------------------------------------------
def load_kernel_description(kernel: SuiteKernel, *, dry_run: bool) -> Any:
    """The suite kernel's description, at dry-run sizes or with the GPU's SM count."""
    from objectives import load_description
    from objectives.description import KernelDescription

    desc = load_description(REPO / kernel.description)
    sizes = dict(desc.sizes)
    if dry_run:
        sizes = dict(kernel.dry_sizes)
    elif "NUM_SMS" in sizes:
        import torch

        sizes["NUM_SMS"] = torch.cuda.get_device_properties(0).multi_processor_count
    if sizes == desc.sizes:
        return desc
    return KernelDescription.model_validate({**desc.model_dump(), "sizes": sizes})


def environment(desc: Any, device: str) -> dict[str, Any]:
    """Versions and the GPU, for the record."""
    import torch

    info: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__}
    for name in ("triton", "ray", "cupy"):
        try:
            info[name] = importlib.import_module(name).__version__
        except ImportError:
            info[name] = None
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(
            gpu=props.name,
            sms=props.multi_processor_count,
            memory_gib=round(props.total_memory / 2**30, 1),
            cuda=torch.version.cuda,
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        )
    info["sizes"] = desc.sizes
    return info


def fresh_triton_cache(work: Path, name: str) -> Path:
    """Point Triton (and every process started from here) at an empty cache folder."""
    path = work / f"triton-cache-{name}"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    os.environ["TRITON_CACHE_DIR"] = str(path)
    return path


# -- step 1: search ------------------------------------------------------------------------------
def run_search(desc: Any, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """ciq-tune's search over the description through Ray Tune, timed end to end."""
    import ray
    from ray import tune

    from bench.description_search import search_description
    from objectives._gpu import UtilizationSampler
    from searchers.placement import format_throughput
    from searchers.placement import search_throughput

    fresh_triton_cache(work, "search")
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        with UtilizationSampler() as nvml:
            run, default = search_description(
                desc,
                budget=args.evals,
                seed=args.seed,
                run_config=tune.RunConfig(
                    name=f"suite-{args.kernel}-{int(time.time())}",
                    storage_path=str(work / "ray"),
                    verbose=0,
                ),
                trials_per_gpu=args.trials_per_gpu,
                time_budget_s=args.search_budget_s,
            )
    finally:
        ray.shutdown()
    placement, trials, wall = run.placement, run.trials, run.wall_s
    log(f"placement: {placement.note}")
    throughput = search_throughput(
        trials,
        wall_s=wall,
        gpus=placement.gpus,
        concurrency=placement.max_concurrent_trials,
    )
    log(format_throughput(throughput))
    statuses: dict[str, int] = {}
    for t in trials:
        statuses[str(t.get("status"))] = statuses.get(str(t.get("status")), 0) + 1
    best = run.best
    log(f"statuses {statuses}; best {best and best['time_ms']} ms: {best and best['config']}")
    return {
        "evals_requested": args.evals,
        "trials_per_gpu": placement.trials_per_gpu,
        "placement": placement.note,
        "steady_state": placement.steady_state,
        "throughput": throughput,
        "compileiq_evals_per_s": COMPILEIQ_EVALS_PER_S,
        "vs_compileiq": throughput["evals_per_s"] / COMPILEIQ_EVALS_PER_S,
        "nvml": nvml.summary(),
        "statuses": statuses,
        "default_config": default,
        "best": best,
        "trials": trials,
    }


# -- step 2: @triton.autotune ------------------------------------------------------------------
def run_autotune(desc: Any, device: str, work: Path) -> dict[str, Any]:
    """The kernel module's `autotune_configs()` through `@triton.autotune`, cold cache."""
    import torch
    import triton

    from objectives._bench import make_inputs
    from objectives.triton import install_allocator
    from objectives.triton_entry import load_module

    module = load_module(str(desc.source))
    if not hasattr(module, "autotune_configs"):
        raise RuntimeError(f"{desc.source} has no autotune_configs(); nothing to compare with")
    configs = module.autotune_configs()
    fresh_triton_cache(work, "autotune")
    install_allocator(device)
    # The interpreter has no CUDA events: time it with the host clock instead.
    bench = _host_autotune_bench if device == "cpu" else None
    tuned = triton.autotune(configs=configs, key=sorted(desc.sizes), do_bench=bench)(
        getattr(module, str(desc.entry))
    )
    tensors = make_inputs(desc, seed=AUTOTUNE_SEED, device=device)

    def grid(meta: Mapping[str, Any]) -> tuple[int, ...]:
        # Sizes from the description: the interpreter passes its own wrapped copies in `meta`.
        return desc.launch({k: meta[k] for k in desc.params if k in meta})["grid"]

    t0 = time.perf_counter()
    tuned[grid](*tensors.values(), **desc.sizes)
    if device == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    best = tuned.best_config
    chosen = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
    params = {k: v for k, v in chosen.items() if k in desc.params}
    # Options the description does not search must be Triton's defaults, or the re-measured
    # configuration would not be the one autotune chose.
    defaults = {"num_warps": 4, "num_stages": 3}
    differing = {k: v for k, v in chosen.items() if k not in params and defaults.get(k) != v}
    if differing:
        raise RuntimeError(f"autotune chose {differing}, which the description cannot express")
    log(f"autotune: {len(configs)} configs in {wall:.1f} s, chose {params}")
    return {"configs": len(configs), "wall_s": wall, "best_config": {"params": params}}


def _host_autotune_bench(fn: Callable[[], Any], quantiles: Any = None) -> list[float]:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    median = sorted(times)[1]
    return [median, min(times), max(times)]


# -- step 3: interleaved re-measurement --------------------------------------------------------
def run_remeasure(
    desc: Any,
    kernel: SuiteKernel,
    variants: Mapping[str, Any],
    *,
    rounds: int,
    warmup_rounds: int,
    device: str,
) -> dict[str, Any]:
    """`objectives.remeasure.remeasure` of the variants against ``tuned``, plus rates.

    Args:
        variants: name → configuration (``{"params": ..., "controls": ...}``), or None for
            the description's alternative (the vendor library).
    """
    from objectives.remeasure import remeasure

    record = remeasure(
        desc,
        variants,
        rounds=rounds,
        warmup_rounds=warmup_rounds,
        device=device,
        reference="tuned",
    )
    for name, why in record["skipped"].items():
        log(f"remeasure: {name} skipped: {why}")
    work = float(eval(kernel.work, {"__builtins__": {}}, dict(desc.sizes)))
    scale = 1e12 if kernel.unit == "TFLOP/s" else 1e9
    for stats in record["variants"].values():
        stats["rate"] = work / (stats["median_ms"] * 1e-3) / scale
    vendor = record["comparisons"].get("tuned_vs_vendor")
    if vendor is not None:
        # Speedup of tuned over the vendor >= 1/1.03 ⇔ tuned time <= 1.03 × vendor time.
        record["within_3pct_of_vendor"] = {
            "time_ratio": 1 / vendor["speedup"],
            "time_ratio_ci_high": 1 / vendor["speedup_ci_low"],
            "holds": vendor["speedup_ci_low"] >= 1 / WITHIN,
        }
    record["unit"] = kernel.unit
    record["rep_ms"] = (record["protocol"] or {}).get("rep_ms")
    for name, stats in record["variants"].items():
        log(
            f"remeasure: {name:9s} {stats['median_ms']:.4f} ms (IQR {stats['iqr_ms']:.4f}, "
            f"{stats['rate']:.4g} {kernel.unit})"
        )
    return record


def exhaustive_variants(desc: Any, path: Path, top: int) -> dict[str, Any]:
    """The `top` best configurations of a recorded space (`bench.record_space`) by recorded
    value, as variants ``exhaustive_1`` … in the description's configuration shape."""
    import gzip

    with gzip.open(path, "rt") as handle:
        data = json.load(handle)
    names = data["tune_params_keys"]
    timed = [e for e in data["cache"].values() if isinstance(e.get("time"), int | float)]
    timed.sort(key=lambda e: e["time"])
    catalog = next(iter(desc.controls), None)
    variants: dict[str, Any] = {}
    for rank, entry in enumerate(timed[:top], start=1):
        config: dict[str, Any] = {"params": {}}
        for name in names:
            if name in desc.params:
                config["params"][name] = entry[name]
            elif catalog is not None:
                config.setdefault("controls", {}).setdefault(catalog, {})[name] = entry[name]
            else:
                raise SystemExit(f"{path}: {name!r} is neither a parameter nor a control")
        variants[f"exhaustive_{rank}"] = config
        log(f"exhaustive #{rank}: recorded {entry['time']:.4f} ms, {config}")
    return variants


# -- markdown --------------------------------------------------------------------------------------
def markdown(data: Mapping[str, Any], kernel: SuiteKernel) -> str:
    """A table fragment for docs/benchmarks.md from the JSON record."""
    name = data["kernel"]
    lines = [f"**{name}** (`{kernel.description}`, sizes {data['sizes']})", ""]
    search = data.get("search")
    if search:
        t = search["throughput"]
        mean = t["mean_s"]
        busy = t["gpu_busy_fraction"]
        nvml = search["nvml"]
        nvml_text = ", ".join(f"{v['mean_pct']:.0f} %" for v in nvml["gpus"].values()) or "n/a"
        after = t.get("evals_per_s_after_first")
        after_text = "" if after is None else f"; {after:.2f} evals/s after the first result"
        lines += [
            f"Search: {t['evaluations']} evaluations in {t['wall_s']:.1f} s = "
            f"**{t['evals_per_s']:.2f} evals/s** ({search['vs_compileiq']:.1f}x CompileIQ's "
            f"{COMPILEIQ_EVALS_PER_S:.2f}{after_text}), {t['concurrency']} trial(s) at a time; "
            f"GPU busy {'n/a' if busy is None else f'{100 * busy:.0f} %'} (benchmark lock), NVML "
            f"utilisation {nvml_text}; per evaluation: compile {mean['compile_s']:.2f} s, GPU "
            f"{mean['gpu_s']:.2f} s, waiting for the GPU {mean['gpu_wait_s']:.2f} s, worker "
            f"start {mean['worker_spawn_s']:.2f} s, outside trials "
            f"{mean['outside_trials']:.2f} s; statuses {search['statuses']}.",
            "",
        ]
    autotune = data.get("autotune")
    remeasure = data.get("remeasure")
    if not remeasure:
        lines.append("No re-measurement (see `errors` in the JSON).")
        return "\n".join(lines) + "\n"
    unit = remeasure["unit"]
    lines += [
        f"| variant | median ms | IQR ms | {unit} | ciq-tune's speedup over it [95 % CI] "
        "| Wilcoxon p | effect d | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    labels = {
        "default": "default configuration",
        "tuned": "ciq-tune"
        + (f", {search['throughput']['evaluations']} evaluations" if search else ""),
        "autotune": "@triton.autotune"
        + (f", {autotune['configs']} configs, {autotune['wall_s']:.0f} s" if autotune else ""),
        "vendor": kernel.vendor_name,
    }
    for rank in range(1, 10):
        labels[f"exhaustive_{rank}"] = f"exhaustive search's #{rank} (recorded value)"
    for variant, stats in remeasure["variants"].items():
        row = [
            labels.get(variant, variant),
            f"{stats['median_ms']:.4f}",
            f"{stats['iqr_ms']:.4f}",
            f"{stats['rate']:.4g}",
        ]
        comparison = remeasure["comparisons"].get(f"tuned_vs_{variant}")
        if comparison is None:
            row += ["—", "", "", ""]
        else:
            row += [
                f"{comparison['speedup']:.3f} [{comparison['speedup_ci_low']:.3f}, "
                f"{comparison['speedup_ci_high']:.3f}]",
                f"{comparison['p_value']:.2g}",
                f"{comparison['cohens_d']:.2f}",
                comparison["verdict"],
            ]
        lines.append("| " + " | ".join(row) + " |")
    within = remeasure.get("within_3pct_of_vendor")
    if within:
        lines += [
            "",
            f"ciq-tune / {kernel.vendor_name} time: {within['time_ratio']:.3f} (95 % CI upper "
            f"bound {within['time_ratio_ci_high']:.3f}); within 3 %: "
            f"**{'yes' if within['holds'] else 'no'}**.",
        ]
    timer = (
        f"do_bench(rep={remeasure['rep_ms']:.0f} ms) medians"
        if remeasure["timer"] == "cuda_events"
        else "host-clock medians of 3 runs (dry run)"
    )
    lines.append(
        f"\n{remeasure['rounds']} interleaved rounds of {timer} per variant after the search; "
        "the speedup is the ratio of medians."
    )
    for variant, why in remeasure["skipped"].items():
        lines.append(f"\nNot re-measured: {variant}: {why}")
    return "\n".join(lines) + "\n"


# -- main ----------------------------------------------------------------------------------------
def _steps(text: str) -> set[str]:
    """`--skip`'s comma-separated steps as a set."""
    steps = {s for s in text.split(",") if s}
    unknown = steps - {"search", "autotune", "remeasure"}
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown steps {sorted(unknown)}")
    return steps


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", required=True, choices=sorted(KERNELS))
    parser.add_argument("--evals", type=int, help="search budget (default 100; dry run 3)")
    parser.add_argument("--out", type=Path, required=True, help="folder for <kernel>.json/.md")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path("/tmp/ciq-suite"),
        help="Ray results and Triton caches (kept out of --out; default %(default)s)",
    )
    parser.add_argument(
        "--trials-per-gpu", type=int, default=6, help="trials sharing a GPU (default 6)"
    )
    parser.add_argument(
        "--search-budget-s",
        type=float,
        default=240.0,
        help="stop the search after this many seconds even if --evals are not spent (240)",
    )
    parser.add_argument("--rounds", type=int, help="re-measurement rounds (default 50; dry 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, help="CPUs of the local Ray (default: all)")
    parser.add_argument(
        "--skip",
        type=_steps,
        default=set(),
        help="comma-separated steps to leave out: search, autotune, remeasure",
    )
    parser.add_argument(
        "--exhaustive",
        type=Path,
        help="a space of this kernel recorded by bench.record_space: its best configurations "
        "by recorded value are re-measured beside ciq-tune's (how close the search got)",
    )
    parser.add_argument(
        "--exhaustive-top", type=int, default=3, help="recorded configurations re-measured (3)"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="on a CPU: Triton's interpreter at tiny sizes, 3 evaluations, host-clock timings",
    )
    args = parser.parse_args(argv)
    args.evals = args.evals or (3 if args.dry_run else 100)
    args.rounds = args.rounds or (5 if args.dry_run else 50)
    if args.evals < 1 or args.rounds < 3 or args.trials_per_gpu < 1:
        parser.error(
            f"--evals >= 1, --rounds >= 3 and --trials-per-gpu >= 1 are needed, got "
            f"{args.evals}, {args.rounds}, {args.trials_per_gpu}"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        # Before anything imports Triton: the driver's own launches run in the interpreter.
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("suite: no CUDA GPU visible; use --dry-run on a CPU", file=sys.stderr)
        return 2
    kernel = KERNELS[args.kernel]
    args.out.mkdir(parents=True, exist_ok=True)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    desc = load_kernel_description(kernel, dry_run=args.dry_run)
    report = Report(
        args.out / f"{args.kernel}.json",
        {
            "kernel": args.kernel,
            "description": kernel.description,
            "sizes": desc.sizes,
            "dry_run": args.dry_run,
            "argv": sys.argv[1:] if argv is None else argv,
        },
    )
    report.step("environment", lambda: environment(desc, device))
    search = None
    if "search" not in args.skip:
        search = report.step("search", lambda: run_search(desc, args, args.work_dir))
    autotune = None
    if desc.kind == "triton" and "autotune" not in args.skip:
        autotune = report.step("autotune", lambda: run_autotune(desc, device, args.work_dir))
    if "remeasure" not in args.skip and search and search["best"]:
        variants: dict[str, Any] = {
            "default": search["default_config"],
            "tuned": search["best"]["config"],
        }
        if autotune:
            variants["autotune"] = autotune["best_config"]
        if args.exhaustive:
            variants.update(exhaustive_variants(desc, args.exhaustive, args.exhaustive_top))
        variants["vendor"] = None
        report.step(
            "remeasure",
            lambda: run_remeasure(
                desc,
                kernel,
                variants,
                rounds=args.rounds,
                warmup_rounds=1 if args.dry_run else 5,
                device=device,
            ),
        )
    (args.out / f"{args.kernel}.md").write_text(markdown(report.data, kernel))
    log(f"wrote {report.path} and {args.kernel}.md; errors: {len(report.data['errors'])}")
    print(markdown(report.data, kernel), flush=True)
    return 1 if report.data["errors"] else 0


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


if __name__ == "__main__":
    sys.exit(main())
