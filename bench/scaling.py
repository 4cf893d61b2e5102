"""Search throughput on 1, 2 and 4 GPUs: evaluations per minute and scaling efficiency.

    python3 -m bench.scaling --out $OUT/scaling              # 4-GPU machine, < 8 min
    python3 -m bench.scaling --trials-per-gpu 4 --out $OUT/shared   # the suite's shared mode
    python3 -m bench.scaling --dry-run --out /tmp/scaling    # CPU only: PTX, 1 and 2 CPUs

On the GPU machine, from the repo root with .whl carried (../shared/tools/gpu-wheels.sh):
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
        .whl/*.whl && export PYTHONPATH=$PWD:/tmp/site RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
    timeout 560 python3 -m bench.scaling --out $OUT/scaling

Every run is the same search: the description (`--description`, the Triton matmul by default),
the same evaluation budget, seed and starting points, N trials per GPU (`--trials-per-gpu`, 1 by
default) placed as `ciq-tune tune` and the suite place them (`searchers.placement`: each trial
`{"cpu": 1, "gpu": 1/N}`, `max_concurrent_trials` = N × GPUs), actors reused so each trial slot
keeps its isolated worker warm, a proposal whenever a trial ends. It uses random proposals by
default: with one seed every run then evaluates the same candidates, whereas a GA's proposals
depend on the order results arrive, which changes with the GPU count (`--strategy auto`
measures the GA instead). Each run is a separate process that sees its GPUs through
CUDA_VISIBLE_DEVICES (Ray honours it) and starts with empty Triton and ciq-tune compile
caches, so no run reuses another's compiles.

Prints a table of evaluations per minute and efficiency = (evals/min on k) / (k × evals/min
on 1), and writes ``<out>.json`` with every run's trials summary. A timed-out candidate holds
its trial slot for the whole timeout (30 s for a compile): with one slot the whole search
waits, with eight slots an eighth of it, which deflates the 1-GPU baseline. Each run therefore also
reports its timeouts, the slot-seconds they held, and evals/min and efficiency without them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MATMUL = ROOT / "examples/kernels/triton/matmul.yaml"
SPILL = ROOT / "examples/kernels/ptx/spill.yaml"
# Headroom for starting Ray and the first workers before a run's search time cap.
RUN_OVERHEAD_S = 60


def run_once(
    description: Path,
    slots: int,
    *,
    use_gpus: bool,
    trials_per_gpu: int,
    evals: int,
    seed: int,
    strategy: str,
    max_search_s: float,
    storage: Path,
) -> dict[str, Any]:
    """One search on `slots` GPUs with `trials_per_gpu` trials each (or on `slots` CPUs, one
    trial each, in a dry run); in this process, whose CUDA_VISIBLE_DEVICES and caches the parent
    has set."""
    import ray
    from ray import tune

    from objectives import load_description
    from objectives import make_search_space
    from objectives import make_trainable
    from objectives import starting_points
    from searchers.kernel_search import kernel_tuner
    from searchers.kernel_search import placement_on_cluster
    from searchers.placement import search_throughput
    from searchers.plan import SearchPlan

    desc = load_description(description)
    space = make_search_space(desc)
    ray.init(
        address="local",  # a new Ray with these resources, never a running one
        num_cpus=max(slots * trials_per_gpu, os.cpu_count() or 1) if use_gpus else slots,
        num_gpus=slots if use_gpus else 0,
        include_dashboard=False,
        log_to_driver=False,
    )
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        if use_gpus and gpus < slots:
            raise RuntimeError(
                f"Ray sees {gpus:g} GPU(s) but this run needs {slots}; CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}"
            )
        placement = placement_on_cluster(desc.kind, trials_per_gpu)
        concurrency = placement.max_concurrent_trials
        plan = SearchPlan.of(
            desc,
            space,
            starting_points(desc, space),
            max_evaluations=evals,
            seed=seed,
            strategy=strategy,
            time_budget_s=max_search_s,
        )
        run_config = tune.RunConfig(name=f"scaling_{slots}", storage_path=str(storage), verbose=0)
        tuner, _ = kernel_tuner(make_trainable(desc), placement, plan, run_config)
        started = time.perf_counter()
        grid = tuner.fit()
        wall_s = time.perf_counter() - started
    finally:
        ray.shutdown()
    trials = [grid[i].metrics or {} for i in range(len(grid))]
    configs = [json.dumps(grid[i].config, sort_keys=True) for i in range(len(grid))]
    statuses: dict[str, int] = {}
    for t in trials:
        statuses[str(t.get("status"))] = statuses.get(str(t.get("status")), 0) + 1
    summary = search_throughput(trials, wall_s=wall_s, gpus=placement.gpus, concurrency=concurrency)
    return {
        "slots": slots,
        "trials_per_gpu": placement.trials_per_gpu if placement.gpus else 1,
        "concurrency": concurrency,
        "resources_per_trial": placement.resources,
        "evaluations": len(trials),
        "wall_s": wall_s,
        "evals_per_min": 60.0 * len(trials) / wall_s,
        **without_timeouts(trials, wall_s=wall_s, concurrency=concurrency),
        "statuses": statuses,
        "throughput": summary,
        "configs": configs,
    }


def without_timeouts(
    trials: list[dict[str, Any]], *, wall_s: float, concurrency: int
) -> dict[str, Any]:
    """The run's timeouts and its evals/min as if they had not happened.

    A timed-out trial held one of `concurrency` slots for its Ray ``time_total_s``; those
    slot-seconds spread over all slots make ``timeout_s / concurrency`` of the wall time. The
    rate without timeouts is the other evaluations over the rest of the wall time (None when
    nothing is left).
    """
    held = [t.get("time_total_s") for t in trials if t.get("status") == "timeout"]
    timeout_s = sum(float(v) for v in held if isinstance(v, int | float) and math.isfinite(v))
    rest_s = wall_s - timeout_s / concurrency
    rate = 60.0 * (len(trials) - len(held)) / rest_s if rest_s > 0 else None
    return {"timeouts": len(held), "timeout_s": timeout_s, "evals_per_min_without_timeouts": rate}


def _child_env(slots: int, use_gpus: bool, cache_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    if use_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(slots))
    # Fresh compile caches: a later run must not reuse the compiles of an earlier one.
    env["TRITON_CACHE_DIR"] = str(cache_root / "triton")
    env["CIQ_TUNE_CACHE"] = str(cache_root / "ciq-tune")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _machine(use_gpus: bool) -> dict[str, Any]:
    info: dict[str, Any] = {"host": platform.node(), "cpus": os.cpu_count()}
    if use_gpus:
        query = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        info["gpus"] = query.stdout.strip().splitlines()
    return info


def add_efficiency(runs: list[dict[str, Any]]) -> None:
    """Set each run's ``efficiency``: its evals/min over `slots` × the 1-slot run's, and
    ``efficiency_without_timeouts`` likewise from the rates without timeouts (None when either
    rate is missing)."""
    base = next(r for r in runs if r["slots"] == 1)
    key = "evals_per_min_without_timeouts"
    for r in runs:
        r["efficiency"] = r["evals_per_min"] / (r["slots"] * base["evals_per_min"])
        r["efficiency_without_timeouts"] = (
            r[key] / (r["slots"] * base[key]) if r[key] and base[key] else None
        )


def table(runs: list[dict[str, Any]], unit: str) -> str:
    """Markdown table of the runs (after `add_efficiency`)."""
    lines = [
        f"| {unit} | trials at a time | evaluations | search s | evals/min | scaling efficiency "
        "| timeouts (slot s) | evals/min, efficiency without timeouts | GPU busy |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        busy = r["throughput"]["gpu_busy_fraction"]
        busy_text = "–" if busy is None else f"{100 * busy:.0f} %"
        rate, eff = r["evals_per_min_without_timeouts"], r["efficiency_without_timeouts"]
        clean = "–" if rate is None or eff is None else f"{rate:.1f}, {eff:.2f}"
        lines.append(
            f"| {r['slots']} | {r['concurrency']} | {r['evaluations']} | {r['wall_s']:.1f} | "
            f"{r['evals_per_min']:.1f} | {r['efficiency']:.2f} | "
            f"{r['timeouts']} ({r['timeout_s']:.0f}) | {clean} | {busy_text} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="writes OUT.json")
    parser.add_argument("--dry-run", action="store_true", help="PTX on CPUs, no GPU needed")
    parser.add_argument(
        "--description",
        type=Path,
        help=f"kernel description (default {MATMUL.relative_to(ROOT)}; "
        f"{SPILL.relative_to(ROOT)} with --dry-run)",
    )
    parser.add_argument(
        "--trials-per-gpu",
        type=int,
        default=1,
        metavar="N",
        help="trials sharing each GPU, as `ciq-tune tune --trials-per-gpu` (default 1)",
    )
    parser.add_argument("--slots", type=int, nargs="+", help="GPU (or CPU) counts; 1 first")
    parser.add_argument("--evals", type=int, default=60, help="evaluations per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategy", default="random", help="random (default) or auto (GA)")
    parser.add_argument(
        "--max-search-s", type=float, default=100, help="search time cap per run (s)"
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--storage", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_gpus = not args.dry_run
    description = (args.description or (SPILL if args.dry_run else MATMUL)).resolve()
    if args.trials_per_gpu < 1:
        parser.error(f"`--trials-per-gpu` must be a positive integer, got {args.trials_per_gpu}")
    if args.dry_run and args.trials_per_gpu != 1:
        parser.error("`--trials-per-gpu` needs GPUs; a dry run places one trial per CPU")
    # What every run is given (and the report records).
    settings = {
        "evals": args.evals,
        "seed": args.seed,
        "strategy": args.strategy,
        "max_search_s": args.max_search_s,
        "trials_per_gpu": args.trials_per_gpu,
    }
    if args.child is not None:
        result = run_once(
            description, args.child, use_gpus=use_gpus, storage=args.storage, **settings
        )
        Path(args.out).write_text(json.dumps(result))
        return
    slots = args.slots or ([1, 2] if args.dry_run else [1, 2, 4])
    if slots[0] != 1:
        parser.error(f"`--slots` must start with 1 (the efficiency baseline), got {slots}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="ciq-scaling-") as tmp:
        for k in slots:
            part = Path(tmp) / f"run_{k}.json"
            cache_root = Path(tmp) / f"cache_{k}"
            command = [
                sys.executable, "-m", "bench.scaling", "--child", str(k), "--out", str(part),
                "--evals", str(args.evals), "--seed", str(args.seed),
                "--strategy", args.strategy, "--max-search-s", str(args.max_search_s),
                "--storage", str(Path(tmp) / f"ray_{k}"),
                "--description", str(description), "--trials-per-gpu", str(args.trials_per_gpu),
            ]  # fmt: skip
            if args.dry_run:
                command.append("--dry-run")
            print(f"run on {k} {'CPU' if args.dry_run else 'GPU'}(s) …", flush=True)
            subprocess.run(
                command,
                env=_child_env(k, use_gpus, cache_root),
                cwd=ROOT,
                check=True,
                timeout=args.max_search_s + RUN_OVERHEAD_S,
            )
            runs.append(json.loads(part.read_text()))
            print(
                f"  {runs[-1]['evaluations']} evaluations in {runs[-1]['wall_s']:.1f} s, "
                f"{runs[-1]['concurrency']} at a time, statuses {runs[-1]['statuses']}",
                flush=True,
            )
    add_efficiency(runs)
    print(table(runs, "CPUs" if args.dry_run else "GPUs"))
    first = set(runs[0]["configs"])
    for r in runs:
        r["same_configs_as_first"] = len(first & set(r.pop("configs")))
    report = {
        "description": str(
            description.relative_to(ROOT) if description.is_relative_to(ROOT) else description
        ),
        "dry_run": args.dry_run,
        "settings": settings,
        "machine": _machine(use_gpus),
        "runs": runs,
    }
    Path(args.out + ".json").write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out}.json")


if __name__ == "__main__":
    main()
