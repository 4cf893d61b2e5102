"""Campaign throughput over whole runs: evaluations/min, NVML busy, first result, GPU scaling.

Whole-run figures (from the command's start to its outputs) of a campaign on 1 and more GPUs:
evaluations per minute, the time to the first result, each GPU's NVML busy share, and the
scaling efficiency (evaluations/min on k GPUs ÷ k × those on one).

    # the campaign of docs/scaling.md on one GPU (its 1-GPU row)
    python3 -m bench.campaign_scaling --gpus 1 --out $OUT/campaign
    # on a host with two GPUs: the 1- and 2-GPU rows and the efficiency
    python3 -m bench.campaign_scaling --gpus 1 2 --out $OUT/campaign
    # two GPUs against the 1-GPU row of an earlier run of the same campaign (its OUT.json)
    python3 -m bench.campaign_scaling --gpus 2 --baseline one_gpu.json --out $OUT/campaign2

On the GPU machine (its image has torch, Triton and NVML but not Ray: the wheels of .whl, carried
with the working tree, go to /tmp/site), from the repository root:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/site .whl/*.whl > /dev/null 2>&1
    export PYTHONPATH=$PWD:/tmp/site RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
    python3 -m bench.campaign_scaling --gpus 1 --out $OUT/campaign

The campaign (default): the LLM GEMM matrices of examples/kernels/triton, fp16
(`matmul_llm.yaml`) and bf16 (`matmul_llm_bf16.yaml`), 12 shapes each, four searches of each
(seeds 0-3): 8 searches of `--evals` evaluations, every evaluation one configuration compiled
once per compile key and timed at its matrix's 12 shapes on a GPU's benchmark server. Others:
``--descriptions A.yaml B.yaml`` (``--searches N``: N searches, over the descriptions in turn,
seeds 0, 1, …), ``--shapes all`` (one search per shape of each description's matrix, as
``ciq-tune tune A.yaml B.yaml --shapes all``), ``--gpus 0`` (CPUs only: one CPU benchmark server
running Triton's interpreter; a PTX description compiles only).

Each run is one process (this script with ``--child``) that starts a local Ray holding its GPUs
(``CUDA_VISIBLE_DEVICES``) and ``--cpus-per-gpu`` CPUs per GPU (default: this host's CPUs per
GPU, so that k GPUs come with k shares of the host), with empty Triton and ciq-tune compile
caches, runs the campaign with `searches.campaign.run_campaign` and exits after writing its
outputs. Its whole-run figures run from that process's start to its exit; NVML samples every
GPU meanwhile. Figures "after the first result" (from the campaign's first finished evaluation
to its last) are printed beside them. Writes ``OUT.json``; prints one table.

The earlier rows of docs/benchmarks.md ("Throughput and campaigns") run copies of the persistent
matmul: ``--description examples/kernels/triton/matmul_persistent.yaml --searches 8 --evals 60``,
with ``--modes per-gpu in-trial --trials-per-gpu 6 --remeasure`` (per-GPU servers against
in-trial timing, both runs' bests re-measured) or ``--with-faults`` (beside them a search whose
kernel hangs and one whose kernel crashes).
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

from bench.script import machine
from bench.script import script_parser

ROOT = Path(__file__).resolve().parents[1]
TRITON = ROOT / "examples/kernels/triton"
CAMPAIGN = (TRITON / "matmul_llm.yaml", TRITON / "matmul_llm_bf16.yaml")
# Kernels that hang or crash on a GPU (`--with-faults`).
FAULTS = ROOT / "bench/data"


def campaign_searches(args: argparse.Namespace) -> list[Any]:
    """The campaign's `SearchSpec`s: with `--shapes`, one per shape of each description's
    matrix (`expand_searches`, as the CLI makes them); else `--searches` over the descriptions
    in turn, the k-th search of a description with seed k. `--with-faults` adds a search whose
    kernel hangs and one whose kernel crashes."""
    from searchers.campaign_specs import SearchSpec
    from searchers.campaign_specs import expand_searches

    descriptions = [Path(d).resolve() for d in args.descriptions]
    if args.shapes:
        searches = expand_searches(descriptions, shapes=args.shapes, budget=args.evals)
    else:
        searches = []
        for i in range(args.searches):
            path = descriptions[i % len(descriptions)]
            seed = i // len(descriptions)
            searches.append(
                SearchSpec(description=path, budget=args.evals, seed=seed, name=f"s{i}")
            )
    if args.with_faults:
        searches += [
            SearchSpec(description=FAULTS / f"{kind}.yaml", budget=4, name=f"fault-{kind}")
            for kind in ("spin", "wild_store")
        ]
    return searches


def run_child(args: argparse.Namespace, gpus: int, mode: str, out: Path) -> dict[str, Any]:
    """One campaign in this process (whose CUDA_VISIBLE_DEVICES and caches the parent set),
    on a local Ray of `args.num_cpus` CPUs and `gpus` GPUs; the figures the parent adds its
    whole-run times to."""
    import ray

    from objectives import load_description
    from searchers.campaign import run_campaign
    from searchers.campaign_specs import CampaignConfig

    searches = campaign_searches(args)
    ray.init(
        address="local",  # a new Ray with these resources, never a running one
        num_cpus=args.num_cpus,
        num_gpus=gpus,
        include_dashboard=False,
        log_to_driver=False,
    )
    config = CampaignConfig.model_validate(
        {
            "out": out,
            "benchmark": mode,
            "tracking": "none",
            "trials_per_search": args.trials_per_search,
            # Staged (per-gpu) trials only compile: as many as the CPUs hold.
            "trials_per_gpu": args.trials_per_gpu if mode == "in-trial" else None,
        }
    )
    try:
        rows = run_campaign(searches, config)
    finally:
        ray.shutdown()
    shapes = {}
    for spec in searches:
        desc = load_description(spec.description)
        shapes[str(spec.description)] = 1 if spec.shape else len(desc.matrix())
    for r in rows:
        error = f", first error: {r['error'][:160]}" if r.get("error") else ""
        print(
            f"    {r['name']}: {r['status']}, {r.get('evaluations')}/{r['budget']} evaluations"
            f"{error}",
            flush=True,
        )
    throughput = {
        r["name"]: json.loads((out / r["name"] / "throughput.json").read_text())
        for r in rows
        if (out / r["name"] / "throughput.json").is_file()
    }
    servers = out / "benchmark_servers.json"
    return {
        "searches": len(rows),
        "shapes": sum(shapes[str(s.description)] for s in searches),
        "statuses": [r["status"] for r in rows],
        "evaluations": sum(int(r.get("evaluations") or 0) for r in rows),
        # Configuration × shape pairs timed: a matrix evaluation is one per shape.
        "pairs": sum(
            int(r.get("evaluations") or 0) * shapes[str(s.description)]
            for r, s in zip(rows, searches, strict=True)
        ),
        "timing": json.loads((out / "campaign_timing.json").read_text()),
        "best": [r.get("best") for r in rows],
        "best_config": [r.get("best_config") for r in rows],
        "search_throughput": throughput,
        "servers": json.loads(servers.read_text()) if servers.is_file() else None,
    }


def run_once(args: argparse.Namespace, work: Path, gpus: int, mode: str) -> dict[str, Any]:
    """One campaign in a fresh process on the first `gpus` GPUs this process sees, timed from
    the process's start to its exit, NVML sampling every GPU meanwhile."""
    from objectives._gpu import UtilizationSampler
    from objectives._gpu import visible_gpus

    name = f"{mode}-{gpus}"
    cpus = args.num_cpus or max(1, args.cpus_per_gpu * max(gpus, 1))
    chosen = visible_gpus()[:gpus]
    if len(chosen) < gpus:
        raise SystemExit(f"a run on {gpus} GPU(s), but this machine shows {len(chosen)}")
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)
    # CUDA numbers the GPUs as NVML does (`run_gpus`).
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["TRITON_CACHE_DIR"] = str(work / f"cache-{name}/triton")
    env["CIQ_TUNE_CACHE"] = str(work / f"cache-{name}/ciq")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [
        sys.executable, "-m", "bench.campaign_scaling", "--out", args.out, "--evals",
        str(args.evals), "--searches", str(args.searches), "--num-cpus", str(cpus),
        "--descriptions", *map(str, args.descriptions), "--child", str(gpus), mode,
        "--work", str(work),
    ]  # fmt: skip
    if args.shapes:
        command += ["--shapes", *args.shapes]
    if args.trials_per_search:
        command += ["--trials-per-search", str(args.trials_per_search)]
    if args.trials_per_gpu:
        command += ["--trials-per-gpu", str(args.trials_per_gpu)]
    if args.with_faults:
        command.append("--with-faults")
    print(f"campaign, {mode}, on {gpus} GPU(s) and {cpus} CPUs …", flush=True)
    with UtilizationSampler() as nvml:
        started = time.time()
        subprocess.run(command, env=env, cwd=ROOT, check=True)
        ended = time.time()
    run = json.loads((work / f"result-{name}.json").read_text())
    timing = run["timing"]
    wall_s = ended - started
    first, last = timing["first_result_at"], timing["last_result_at"]
    steady = timing["evals_per_s_after_first"]
    run.update(
        gpus=gpus,
        cpus=cpus,
        mode=mode,
        started_at=started,
        wall_s=wall_s,
        evals_per_min=60.0 * run["evaluations"] / wall_s,
        pairs_per_min=60.0 * run["pairs"] / wall_s,
        first_result_s=None if first is None else first - started,
        evals_per_min_after_first=None if not steady else 60 * steady,
        nvml=nvml.summary(),
        # GPU busy from the first finished evaluation to the last.
        nvml_after_first=nvml.summary(since=first, until=last),
    )
    run["gpu_bus_ids"] = run_gpus(chosen)
    run["busy_pct"] = busy(run["nvml"], run["gpu_bus_ids"])
    run["busy_pct_after_first"] = busy(run["nvml_after_first"], run["gpu_bus_ids"])
    run["start"] = start_breakdown(run)
    print(
        f"  {run['evaluations']} evaluations in {wall_s:.1f} s = {run['evals_per_min']:.1f}/min "
        f"(first result at {_fmt(run['first_result_s'], 1)} s; "
        f"{_fmt(run['evals_per_min_after_first'], 1)}/min after it), NVML busy "
        f"{run['busy_pct']} % ({run['busy_pct_after_first']} % after the first result), "
        f"statuses {run['statuses']}",
        flush=True,
    )
    start = run["start"]
    print(
        f"  start: the campaign called at {_fmt(start['campaign_s'], 1)} s (imports, Ray), "
        f"its searches' tasks at {_fmt(start['search_tasks_s'], 1)} s, their Tune runs at "
        f"{_fmt(start['tune_runs_s'], 1)} s, the benchmark servers ready "
        f"{_pcts(start['servers_ready_s'])} s after they started, the first result at "
        f"{_fmt(run['first_result_s'], 1)} s",
        flush=True,
    )
    return run


def start_breakdown(run: dict[str, Any]) -> dict[str, Any]:
    """Where a run's start went, in seconds from the process's start: when it called the
    campaign (imports, Ray's start), when the first of its searches' tasks and Tune runs
    started, and each benchmark server's time to warm workers."""

    def first(key: str) -> float | None:
        stamps = [s[key] for s in run["search_throughput"].values() if s.get(key)]
        return min(stamps) - run["started_at"] if stamps else None

    return {
        "campaign_s": run["timing"]["started_at"] - run["started_at"],
        "search_tasks_s": first("task_started_at"),
        "tune_runs_s": first("fit_started_at"),
        "servers_ready_s": [s["ready_s"] for s in run["servers"] or [] if s.get("ready_s")],
    }


def run_gpus(entries: list[str]) -> list[str]:
    """The PCI bus ids (NVML's, as `UtilizationSampler` keys them) of ``CUDA_VISIBLE_DEVICES``
    entries: indices in PCI order, or UUIDs; none without NVML."""
    from objectives._gpu import _nvml_bus_id

    try:
        import pynvml

        pynvml.nvmlInit()
        ids = []
        for entry in entries:
            if entry.isdigit():
                handle = pynvml.nvmlDeviceGetHandleByIndex(int(entry))
            else:
                handle = pynvml.nvmlDeviceGetHandleByUUID(entry)
            ids.append(_nvml_bus_id(pynvml.nvmlDeviceGetPciInfo(handle)))
        return ids
    except Exception:  # no NVML: no utilisation to report either
        return []


def busy(summary: dict[str, Any], bus_ids: list[str]) -> list[float]:
    """Mean NVML utilisation (%) of the run's GPUs (`run_gpus`)."""
    return [round(summary["gpus"][b]["mean_pct"], 1) for b in bus_ids if b in summary["gpus"]]


def with_efficiency(runs: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> None:
    """Each run's efficiency: its rate ÷ (its GPUs × the 1-GPU run's rate of the same mode),
    over the whole run and after the first result; the 1-GPU run from `runs`, else from
    `baseline` (None where there is none)."""
    ones = {r["mode"]: r for r in [*baseline, *runs] if r["gpus"] == 1}
    for r in runs:
        one = ones.get(r["mode"])
        k = max(r["gpus"], 1)
        r["efficiency"] = r["evals_per_min"] / (k * one["evals_per_min"]) if one else None
        steady = r["evals_per_min_after_first"]
        one_steady = one["evals_per_min_after_first"] if one else None
        r["efficiency_after_first"] = steady / (k * one_steady) if steady and one_steady else None


def table(runs: list[dict[str, Any]]) -> str:
    """The runs as one Markdown table (docs/scaling.md's columns)."""
    lines = [
        "| mode | GPUs | CPUs | searches | shapes | evaluations | whole-run s | evaluations/min "
        "| first result s | NVML busy % per GPU | efficiency | evaluations/min after the first "
        "| efficiency after the first | NVML busy % after the first |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        lines.append(
            f"| {r['mode']} | {r['gpus']} | {r['cpus']} | {r['searches']} | {r['shapes']} | "
            f"{r['evaluations']} | {r['wall_s']:.1f} | {r['evals_per_min']:.1f} | "
            f"{_fmt(r['first_result_s'], 1)} | {_pcts(r['busy_pct'])} | "
            f"{_fmt(r['efficiency'])} | {_fmt(r['evals_per_min_after_first'], 1)} | "
            f"{_fmt(r['efficiency_after_first'])} | {_pcts(r['busy_pct_after_first'])} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    host_gpus = _host_gpus()
    parser = script_parser("python3 -m bench.campaign_scaling", __doc__)
    parser.add_argument("--out", required=True, help="writes OUT.json")
    parser.add_argument(
        "--descriptions",
        "--description",
        nargs="+",
        type=Path,
        default=list(CAMPAIGN),
        help="the campaign's descriptions (default: the LLM GEMM matrices, fp16 and bf16)",
    )
    parser.add_argument(
        "--searches",
        type=int,
        default=8,
        help="searches, over the descriptions in turn, seeds 0, 1, … (default 8; not with "
        "--shapes)",
    )
    parser.add_argument(
        "--shapes", nargs="+", help="one search per shape of each matrix: 'all' or shape labels"
    )
    parser.add_argument("--evals", type=int, default=50, help="evaluations per search (50)")
    parser.add_argument(
        "--gpus", type=int, nargs="+", default=[1], help="GPU counts, a run each (0: CPUs only)"
    )
    parser.add_argument(
        "--modes", nargs="+", default=["per-gpu"], help="per-gpu, in-trial, auto (a run each)"
    )
    parser.add_argument(
        "--cpus-per-gpu",
        type=int,
        default=max(1, (os.cpu_count() or 1) // max(host_gpus, 1)),
        help="CPUs of each run's Ray per GPU (default: this host's CPUs per GPU)",
    )
    parser.add_argument("--num-cpus", type=int, help="CPUs of every run's Ray, whatever its GPUs")
    parser.add_argument(
        "--baseline", type=Path, help="an earlier OUT.json whose 1-GPU run the efficiency uses"
    )
    parser.add_argument("--trials-per-search", type=int)
    parser.add_argument("--trials-per-gpu", type=int, help="in-trial mode: trials sharing a GPU")
    parser.add_argument(
        "--with-faults",
        action="store_true",
        help="add a search whose kernel hangs and one whose kernel crashes (4 evaluations each)",
    )
    parser.add_argument(
        "--remeasure",
        action="store_true",
        help="re-measure each run's first best and the baseline (a description without shapes)",
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.shapes and args.with_faults:
        parser.error("--with-faults adds searches to copies of descriptions, not to --shapes")
    if min(args.gpus) < 0 or args.evals < 1 or args.searches < 1:
        parser.error("--gpus must be >= 0, --evals and --searches >= 1")
    if args.remeasure and not args.child:
        from objectives import load_description

        if load_description(args.descriptions[0]).shapes:
            parser.error("--remeasure re-measures the first description's best: one without shapes")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        gpus, mode = int(args.child[0]), args.child[1]
        result = run_child(args, gpus, mode, args.work / f"{mode}-{gpus}")
        (args.work / f"result-{mode}-{gpus}.json").write_text(json.dumps(result, default=str))
        return
    runs = []
    with tempfile.TemporaryDirectory(prefix="ciq-campaign-") as tmp:
        for mode in args.modes:
            for gpus in args.gpus:
                runs.append(run_once(args, Path(tmp), gpus, mode))
    baseline = json.loads(args.baseline.read_text())["runs"] if args.baseline else []
    with_efficiency(runs, baseline)
    print(table(runs))
    report: dict[str, Any] = {
        "machine": machine(),
        "descriptions": [str(d) for d in args.descriptions],
        "shapes": args.shapes,
        "evals": args.evals,
        "runs": runs,
    }
    if args.remeasure:
        report["remeasured"] = remeasure_bests(Path(args.descriptions[0]), runs)
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


def _host_gpus() -> int:
    from objectives._gpu import visible_gpus

    return len(visible_gpus())


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pcts(values: list[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in values) or "-"


if __name__ == "__main__":
    main()
