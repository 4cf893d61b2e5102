"""Campaign throughput: evaluations/s, GPU busy (NVML) and scaling over GPU counts.

    # one GPU, one search, per-GPU benchmark server vs in-trial timing (the 1-H200 must-show)
    # (--remeasure: both runs' best and the baseline re-measured in interleaved rounds)
    python3 -m bench.campaign_scaling --searches 1 --evals 100 --modes per-gpu in-trial \
        --gpus 1 --out $OUT/single
    # a campaign of 8 searches on 1 and 2 GPUs (efficiency = rate on 2 / (2 × rate on 1))
    python3 -m bench.campaign_scaling --searches 8 --evals 40 --gpus 1 2 --out $OUT/campaign
    # faults: a search whose kernel hangs and one whose kernel crashes beside 4 good ones
    python3 -m bench.campaign_scaling --searches 4 --evals 30 --with-faults --out $OUT/faults
    # CPU only (Triton's interpreter at a tiny size, one CPU benchmark server)
    python3 -m bench.campaign_scaling --dry-run --searches 1 --evals 12 --out /tmp/cs

Each run is a separate process with a fresh local Ray that sees its GPUs through
CUDA_VISIBLE_DEVICES, and fresh Triton and ciq-tune compile caches, running
`searchers.campaign.run_campaign` over `--searches` copies of the description (seeds 0, 1, …)
while NVML samples every GPU's utilisation. Writes ``<out>.json``; prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PERSISTENT = ROOT / "examples/kernels/triton/matmul_persistent.yaml"
SCALE = ROOT / "tests/objectives/data/scale.py"
# Kernels that hang or crash on a GPU (`--with-faults`).
FAULTS = ROOT / "bench/data"


def tiny_description(folder: Path) -> Path:
    """A Triton description small enough for the interpreter (a dry run on CPUs)."""
    import yaml

    data = {
        "name": "scale",
        "kind": "triton",
        "source": str(SCALE),
        "entry": "scale_kernel",
        "metric": "time_ms",
        "sizes": {"n": 4096},
        "inputs": [{"name": "x", "shape": ["n"]}, {"name": "y", "shape": ["n"]}],
        "outputs": ["y"],
        "grid": "(ceil(n / BLOCK),)",
        "reference": "2.0 * x",
        "params": {"BLOCK": {"ordinal": [32, 64, 128, 256, 512, 1024]}},
    }
    path = folder / "scale.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_once(args: argparse.Namespace, gpus: int, mode: str) -> dict[str, Any]:
    """One campaign in this process (whose CUDA_VISIBLE_DEVICES the parent set)."""
    import ray

    from objectives._gpu import UtilizationSampler
    from searchers.campaign import run_campaign
    from searchers.campaign_specs import CampaignConfig
    from searchers.campaign_specs import SearchSpec

    ray.init(
        address="local",
        num_cpus=args.num_cpus or os.cpu_count(),
        num_gpus=gpus,
        include_dashboard=False,
        log_to_driver=False,
    )
    searches = [
        SearchSpec(description=args.description, budget=args.evals, seed=i, name=f"s{i}")
        for i in range(args.searches)
    ]
    if args.with_faults:
        searches += [
            SearchSpec(description=FAULTS / f"{kind}.yaml", budget=4, name=f"fault-{kind}")
            for kind in ("spin", "wild_store")
        ]
    config = CampaignConfig.model_validate(
        {
            "out": args.work / f"{mode}-{gpus}",
            "benchmark": mode,
            "tracking": "none",
            "trials_per_search": args.trials_per_search,
            # Staged (per-gpu) trials only compile: as many as the CPUs hold.
            "trials_per_gpu": args.trials_per_gpu if mode == "in-trial" else None,
        }
    )
    try:
        with UtilizationSampler() as nvml:
            t0 = time.perf_counter()
            rows = run_campaign(searches, config)
            wall_s = time.perf_counter() - t0
    finally:
        ray.shutdown()
    evaluations = sum(int(r.get("evaluations") or 0) for r in rows)
    throughput = [
        json.loads((config.out / r["name"] / "throughput.json").read_text())
        for r in rows
        if (config.out / r["name"] / "throughput.json").is_file()
    ]
    servers = config.out / "benchmark_servers.json"
    timing = json.loads((config.out / "campaign_timing.json").read_text())
    for r in rows:
        error = f", first error: {r['error'][:160]}" if r.get("error") else ""
        print(
            f"    {r['name']}: {r['status']}, {r.get('evaluations')}/{r['budget']} evaluations"
            f"{error}"
        )
    return {
        "searches_wall_s": timing["searches_wall_s"],
        "evals_per_s_after_first": timing["evals_per_s_after_first"],
        "gpus": gpus,
        "mode": mode,
        "searches": len(rows),
        "statuses": [r["status"] for r in rows],
        "evaluations": evaluations,
        "wall_s": wall_s,
        "evals_per_s": evaluations / wall_s,
        "evals_per_min": 60 * evaluations / wall_s,
        "nvml": nvml.summary(),
        # GPU busy from the first finished evaluation to the last: the steady state, without
        # starting Ray, the benchmark servers and the trials' workers.
        "nvml_after_first": nvml.summary(
            since=timing["first_result_at"], until=timing["last_result_at"]
        ),
        "best": [r.get("best") for r in rows],
        "best_config": [r.get("best_config") for r in rows],
        "search_throughput": throughput,
        "servers": json.loads(servers.read_text()) if servers.is_file() else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="writes OUT.json")
    parser.add_argument("--description", type=Path, help=f"default {PERSISTENT.name}")
    parser.add_argument("--searches", type=int, default=8)
    parser.add_argument("--evals", type=int, default=40, help="evaluations per search")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1])
    parser.add_argument("--modes", nargs="+", default=["per-gpu"])
    parser.add_argument("--num-cpus", type=int, help="CPUs of each run's Ray (default: all)")
    parser.add_argument("--trials-per-search", type=int)
    parser.add_argument("--trials-per-gpu", type=int, help="in-trial mode: trials sharing a GPU")
    parser.add_argument("--dry-run", action="store_true", help="CPU only, Triton interpreter")
    parser.add_argument(
        "--with-faults",
        action="store_true",
        help="add a search whose kernel hangs and one whose kernel crashes (4 evaluations each)",
    )
    parser.add_argument(
        "--remeasure", action="store_true", help="re-measure each run's best and the baseline"
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        gpus, mode = int(args.child[0]), args.child[1]
        result = run_once(args, gpus, mode)
        (args.work / f"result-{mode}-{gpus}.json").write_text(json.dumps(result, default=str))
        return
    runs = []
    with tempfile.TemporaryDirectory(prefix="ciq-campaign-") as tmp:
        work = Path(tmp)
        description = args.description or (tiny_description(work) if args.dry_run else PERSISTENT)
        for mode in args.modes:
            for gpus in [0] if args.dry_run else args.gpus:
                env = dict(os.environ)
                if not args.dry_run:
                    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
                env["TRITON_CACHE_DIR"] = str(work / f"cache-{mode}-{gpus}/triton")
                env["CIQ_TUNE_CACHE"] = str(work / f"cache-{mode}-{gpus}/ciq")
                env["PYTHONPATH"] = os.pathsep.join(
                    filter(None, [str(ROOT), env.get("PYTHONPATH")])
                )
                command = [
                    sys.executable, "-m", "bench.campaign_scaling", "--out", args.out,
                    "--description", str(description), "--searches", str(args.searches),
                    "--evals", str(args.evals), "--child", str(gpus), mode, "--work", str(work),
                ]  # fmt: skip
                if args.num_cpus:
                    command += ["--num-cpus", str(args.num_cpus)]
                if args.trials_per_search:
                    command += ["--trials-per-search", str(args.trials_per_search)]
                if args.trials_per_gpu:
                    command += ["--trials-per-gpu", str(args.trials_per_gpu)]
                if args.with_faults:
                    command.append("--with-faults")
                print(f"campaign {mode} on {gpus} GPU(s) …", flush=True)
                subprocess.run(command, env=env, cwd=ROOT, check=True)
                runs.append(json.loads((work / f"result-{mode}-{gpus}.json").read_text()))
                r = runs[-1]
                print(
                    f"  {r['evaluations']} evaluations in {r['wall_s']:.1f} s = "
                    f"{r['evals_per_s']:.2f}/s ({r['evals_per_s_after_first']} after the first), "
                    f"NVML busy {_busy(r)} ({_busy(r, 'nvml_after_first')} after the first), "
                    f"statuses {r['statuses']}",
                    flush=True,
                )
    base = {r["mode"]: r for r in runs if r["gpus"] == min(args.gpus)}
    print(
        "| mode | GPUs | searches | evaluations | s | evals/min | efficiency | evals/min after "
        "the first | efficiency after the first | NVML busy % | NVML busy % after the first |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        b = base.get(r["mode"])
        k = max(r["gpus"], 1)
        eff = r["evals_per_min"] / (k * b["evals_per_min"]) if b else None
        steady = 60 * r["evals_per_s_after_first"] if r["evals_per_s_after_first"] else None
        b_steady = 60 * b["evals_per_s_after_first"] if b and b["evals_per_s_after_first"] else None
        eff_steady = steady / (k * b_steady) if steady and b_steady else None
        r["efficiency"], r["efficiency_after_first"] = eff, eff_steady
        print(
            f"| {r['mode']} | {r['gpus']} | {r['searches']} | {r['evaluations']} | "
            f"{r['wall_s']:.1f} | {r['evals_per_min']:.1f} | {_fmt(eff)} | {_fmt(steady, 1)} | "
            f"{_fmt(eff_steady)} | {_busy(r)} | {_busy(r, 'nvml_after_first')} |"
        )
    report: dict[str, Any] = {"runs": runs}
    if args.remeasure:
        report["remeasured"] = remeasure_bests(Path(args.description or PERSISTENT), runs)
        for name, value in report["remeasured"]["variants"].items():
            print(
                f"re-measured {name}: {value['median_ms']:.4f} ms "
                f"[{value['median_ci_low_ms']:.4f}, {value['median_ci_high_ms']:.4f}]"
            )
    Path(args.out + ".json").write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {args.out}.json")


def remeasure_bests(description: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Re-measure the first search's best configuration of each run and the baseline in
    interleaved rounds (`objectives.remeasure`), on this process's first GPU."""
    from objectives import load_description
    from objectives import make_search_space
    from objectives import starting_points
    from objectives.remeasure import remeasure

    desc = load_description(description)
    variants: dict[str, Any] = {"baseline": starting_points(desc, make_search_space(desc))[0]}
    for r in runs:
        if r["best_config"] and r["best_config"][0]:
            variants[f"{r['mode']}-{r['gpus']}gpu"] = json.loads(r["best_config"][0])
    return remeasure(
        desc, variants, rounds=10, warmup_rounds=2, device="cuda", reference="baseline"
    )


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _busy(run: dict[str, Any], key: str = "nvml") -> list[float]:
    return [round(v["mean_pct"], 1) for v in run[key]["gpus"].values()]


if __name__ == "__main__":
    main()
