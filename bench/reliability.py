"""Fault injection and kill-and-restore figures for docs/reliability.md (CPU, Ray on 2 CPUs).

    PYTHONPATH=$PWD python -m bench.reliability --out docs/data/reliability_cpu.json

Runs each fault kind of `searchers.fault_injection.FAULTS` at 30 % of trials through real Ray
Tune, a mix of the kinds with two objectives (steady-state and generational), a hung trial
against the searcher's time budget, and SIGKILL of the driver + restore at three points; prints
one Markdown row per run and writes every summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from searchers.fault_injection import FAULTS
from searchers.fault_injection import kill_and_restore
from searchers.fault_injection import run_faulty_search

UNWRAPPED = [f for f in FAULTS if f not in ("hang", "leak")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file for the summaries")
    parser.add_argument("--budget", type=int, default=20, help="evaluations per run")
    parser.add_argument("--rate", type=float, default=0.3, help="share of faulty trials")
    parser.add_argument("--skip-kill", action="store_true", help="no kill-and-restore runs")
    parser.add_argument(
        "--leak-only", action="store_true", help="only the worker-recycling curve (no Ray)"
    )
    parser.add_argument(
        "--reuse-actors",
        action="store_true",
        help="Tune's reuse_actors (faster; a leak then accumulates in one worker)",
    )
    args = parser.parse_args()
    if args.leak_only:
        curves = {str(limit): leak_curve(8, limit) for limit in (None, 1000.0)}
        args.out.write_text(json.dumps(curves, indent=2) + "\n")
        for limit, rows in curves.items():
            print(f"max_rss_mb={limit}: " + " ".join(f"{r['rss_mb']}" for r in rows))
        return 0
    import ray

    runs: list[dict[str, Any]] = []
    storage = Path(tempfile.mkdtemp(prefix="ciq-reliability-"))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        plans: list[dict[str, Any]] = [{"fault": f} for f in UNWRAPPED]
        plans += [
            {"fault": "hang", "isolated": True, "trial_timeout_s": 5.0},
            {"fault": "leak", "isolated": True, "max_worker_rss_mb": 1000.0, "reuse_actors": True},
            {"fault": UNWRAPPED, "objectives": 2, "steady_state": True},
            {"fault": UNWRAPPED, "objectives": 2, "steady_state": False},
            {"fault": UNWRAPPED, "objectives": 1, "steady_state": False},
            {
                "fault": "hang",
                "isolated": True,
                "trial_timeout_s": 600.0,
                "time_budget_s": 30.0,
                "budget": 1000,
            },
        ]
        for i, plan in enumerate(plans):
            plan = {
                "budget": args.budget,
                "rate": args.rate,
                "seed": i,
                "reuse_actors": args.reuse_actors,
                **plan,
            }
            summary = run_faulty_search(storage=storage / f"run{i}", **plan).as_dict()
            summary["time_budget_s"] = plan.get("time_budget_s")
            runs.append(summary)
            print(_row(summary), flush=True)
    finally:
        ray.shutdown()
    kills = []
    if not args.skip_kill:
        for point in (3, args.budget // 2, args.budget - 3):
            start = time.perf_counter()
            record = kill_and_restore(
                storage / f"kill{point}", budget=args.budget, kill_after=point
            )
            record["wall_s"] = round(time.perf_counter() - start, 1)
            kills.append(record)
            print(json.dumps(record), flush=True)
    args.out.write_text(json.dumps({"runs": runs, "kills": kills}, indent=2) + "\n")
    return 0


def leak_curve(tasks: int, max_rss_mb: float | None) -> list[dict[str, Any]]:
    """RSS of an isolated worker after each task of one that keeps 200 MB more alive each time
    (`tests.objectives.isolate_targets.leak`), with and without the memory limit."""
    from objectives._isolate import IsolatedWorker

    worker = IsolatedWorker(max_rss_mb=max_rss_mb, max_tasks=None)
    rows = []
    try:
        for _ in range(tasks):
            result = worker.run(
                "tests.objectives.isolate_targets:leak", 200, compile_timeout_s=60, run_timeout_s=60
            )
            rows.append(
                {
                    "pid": result["pid"],
                    "rss_mb": round(result["rss_mb"]),
                    "recycled": result.get("worker_recycled"),
                }
            )
    finally:
        worker.close()
    return rows


def _row(s: dict[str, Any]) -> str:
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items()))
    return (
        f"| {s['fault']} | {s['objectives']} | {'steady' if s['steady_state'] else 'gen'} | "
        f"{s['evaluations']}/{s['budget']} | {s['faulty']} | {s['lost']} | {s['duplicated']} | "
        f"{s['wrong_values_accepted']} | {s['best']} / {s['healthy_best']} | {statuses} | "
        f"{s['max_failed_trial_s']} | {s['max_worker_rss_mb']} | {s['wall_s']} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
