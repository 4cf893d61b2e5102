"""Search-efficiency comparison on recorded tuning spaces: JSON plus a markdown table.

    python -m bench.search_efficiency --data ../shared/benchdata \
        --datasets '*kt_rtx/gemm/*' --tuners ciq,random,optuna_tpe --seeds 30 --out gemm.json

Per dataset and tuner, over seeds: median unique evaluations to reach 90/95/98 % of the
optimum (null when the median run does not reach it within the budget), the mean best fraction
at budgets 25…800, the Kernel Tuner methodology score relative to random search and the tuner's
own time per suggestion. Per family (a dataset's folder), the median over all its runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.ciq import ENGINE_TUNERS
from bench.ciq import engine_tuner
from bench.metrics import BUDGETS
from bench.metrics import TARGETS
from bench.metrics import evals_to
from bench.metrics import mean_fraction
from bench.metrics import median_evals
from bench.metrics import methodology_score
from bench.peers import PEERS
from bench.peers import Tuner
from bench.replay import DEFAULT_DATA
from bench.replay import BenchError
from bench.replay import best_fraction_trace
from bench.replay import list_datasets
from bench.replay import load_problem
from bench.script import machine
from bench.script import run_jobs
from bench.script import script_parser
from bench.script import write_report
from bench.transfer import EARLIER_BUDGET
from bench.transfer import EarlierSearch
from bench.transfer import transfer_tuners

DEFAULT_TUNERS = ("ciq", "random", "optuna_tpe", "optuna_nsga2", "kt_genetic_algorithm")


def tuners(
    ciq_config: dict[str, Any] | None = None, transfer: EarlierSearch | None = None
) -> dict[str, Tuner]:
    """Every tuner the harness can run, by name; `ciq_config` sets the `ciq` tuner's
    settings (the default strategy's; its defaults if None); with `transfer`, the tuners that
    start from that earlier search (`bench.transfer`)."""
    if transfer is not None:
        return transfer_tuners(transfer, ciq_config)
    out = {
        name: engine_tuner(strategy, ciq_config if name == "ciq" else None)
        for name, strategy in ENGINE_TUNERS.items()
    }
    out.update(PEERS)
    return out


def _run_job(job: tuple[str, str, str, int, int, dict[str, Any], int | None]) -> dict[str, Any]:
    data, dataset, tuner, seed, budget, ciq_config, earlier_budget = job
    problem = load_problem(data, dataset)
    transfer = None if earlier_budget is None else EarlierSearch(data, earlier_budget)
    if transfer is not None:
        transfer(problem, seed)  # the earlier search is not the tuner's time
    start = time.perf_counter()
    replay = tuners(ciq_config, transfer)[tuner](problem, budget, seed)
    seconds = time.perf_counter() - start
    return {
        "dataset": dataset,
        "tuner": tuner,
        "seed": seed,
        "trace": best_fraction_trace(replay, min(budget, len(problem.feasible))),
        "evaluations": len(replay.seen),
        "seconds": seconds,
    }


def _key(target: float) -> str:
    return f"evals_to_{round(target * 100)}"


def summarise(data: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per dataset and tuner metrics, and per family medians, from the raw runs."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        grouped[run["dataset"]][run["tuner"]].append(run)
    datasets: dict[str, Any] = {}
    family_counts: dict[str, dict[str, dict[str, list[int | None]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for dataset, by_tuner in sorted(grouped.items()):
        problem = load_problem(data, dataset)
        family = str(Path(dataset).parent)
        entry: dict[str, Any] = {
            "family": family,
            "feasible": len(problem.feasible),
            "optimum_ms": problem.optimum,
            "random_expected": {_key(t): problem.random_expected_evals(t) for t in TARGETS},
            "tuners": {},
        }
        for tuner, tuner_runs in sorted(by_tuner.items()):
            traces = [r["trace"] for r in sorted(tuner_runs, key=lambda r: r["seed"])]
            stats: dict[str, Any] = {"seeds": len(traces), "budget": len(traces[0])}
            for target in TARGETS:
                counts = [evals_to(t, target) for t in traces]
                stats[_key(target)] = median_evals(counts)
                family_counts[family][tuner][_key(target)].extend(counts)
            stats["mean_fraction"] = {str(b): mean_fraction(traces, b) for b in BUDGETS}
            stats["score"] = methodology_score(problem, traces)
            evaluations = sum(r["evaluations"] for r in tuner_runs)
            stats["ms_per_suggestion"] = 1e3 * sum(r["seconds"] for r in tuner_runs) / evaluations
            entry["tuners"][tuner] = stats
        datasets[dataset] = entry
    families = {
        family: {
            tuner: {k: median_evals(v) for k, v in counts.items()}
            for tuner, counts in by_tuner.items()
        }
        for family, by_tuner in family_counts.items()
    }
    return {"datasets": datasets, "families": families}


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}"


def markdown(summary: dict[str, Any]) -> str:
    """A markdown report: a family table, then one row per dataset and tuner."""
    lines = [
        "Median unique evaluations to reach 90/95/98 % of the optimum (– = not reached by the "
        "median run within the budget).",
        "",
        "| family | tuner | to 90 % | to 95 % | to 98 % |",
        "|---|---|---|---|---|",
    ]
    for family, by_tuner in sorted(summary["families"].items()):
        for tuner, stats in sorted(by_tuner.items()):
            cells = [_fmt(stats[_key(t)]) for t in TARGETS]
            lines.append(f"| {family} | {tuner} | {' | '.join(cells)} |")
    budgets = " | ".join(f"@{b}" for b in BUDGETS)
    lines += [
        "",
        f"| dataset | tuner | to 90 % | to 95 % | to 98 % | {budgets} | score | ms/suggestion |",
        "|---|---|---|---|---|" + "---|" * len(BUDGETS) + "---|---|",
    ]
    for dataset, entry in summary["datasets"].items():
        random_cells = [_fmt(entry["random_expected"][_key(t)]) for t in TARGETS]
        lines.append(
            f"| {dataset} | random (closed form) | {' | '.join(random_cells)} |"
            + " |" * len(BUDGETS)
            + " 0 | |"
        )
        for tuner, stats in entry["tuners"].items():
            cells = [_fmt(stats[_key(t)]) for t in TARGETS]
            fractions = [_fmt(stats["mean_fraction"][str(b)], 3) for b in BUDGETS]
            lines.append(
                f"| {dataset} | {tuner} | {' | '.join(cells)} | {' | '.join(fractions)} | "
                f"{_fmt(stats['score'], 3)} | {_fmt(stats['ms_per_suggestion'], 2)} |"
            )
    return "\n".join(lines) + "\n"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = script_parser("python -m bench.search_efficiency", __doc__)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="benchdata folder with load.py")
    parser.add_argument("--datasets", nargs="*", default=[], help="globs of dataset paths")
    parser.add_argument(
        "--tuners",
        default=",".join(DEFAULT_TUNERS),
        help=f"comma-separated tuner names: {', '.join(tuners())}",
    )
    parser.add_argument("--seeds", type=int, required=True, help="runs per dataset and tuner")
    parser.add_argument(
        "--budget", type=int, default=max(BUDGETS), help="unique evaluations per run"
    )
    parser.add_argument(
        "--tuner-budget",
        action="append",
        default=[],
        metavar="NAME=N",
        help="a smaller budget for a slow tuner, e.g. optuna_tpe=400",
    )
    parser.add_argument(
        "--ciq-config",
        default="{}",
        help="settings of the `ciq` tuner (the default strategy) as JSON, for tuning it, "
        "e.g. '{\"explore_share\": 0.5}'",
    )
    parser.add_argument(
        "--transfer",
        action="store_true",
        help="start every run from an earlier search of the same kernel on another GPU "
        "(bench/transfer.py); Kernel Tuner's strategies take no warm start",
    )
    parser.add_argument(
        "--earlier-budget",
        type=int,
        default=EARLIER_BUDGET,
        help="evaluations of that earlier search",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", required=True, help="JSON file; the table goes beside it (.md)")
    args = parser.parse_args(argv)
    if args.earlier_budget < 1:
        parser.error(f"--earlier-budget must be at least 1, got {args.earlier_budget}")
    known = tuners(transfer=EarlierSearch(args.data) if args.transfer else None)
    args.tuner_names = [t.strip() for t in args.tuners.split(",") if t.strip()]
    unknown = [t for t in args.tuner_names if t not in known]
    if unknown:
        parser.error(
            f"--tuners names unknown tuners {unknown}; known"
            + (" with --transfer" if args.transfer else "")
            + f": {', '.join(known)}"
        )
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got --seeds={args.seeds}")
    budgets = {}
    for item in args.tuner_budget:
        name, _, value = item.partition("=")
        if name not in known or not value.isdigit() or int(value) < 1:
            parser.error(f"--tuner-budget wants NAME=N with a known tuner, got {item!r}")
        budgets[name] = int(value)
    args.budgets = budgets
    try:
        args.ciq_config = json.loads(args.ciq_config)
    except json.JSONDecodeError as exc:
        parser.error(f"--ciq-config must be a JSON object, got {args.ciq_config!r}: {exc}")
    if not isinstance(args.ciq_config, dict):
        parser.error(f"--ciq-config must be a JSON object, got {args.ciq_config!r}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    try:
        datasets = list_datasets(args.data, args.datasets)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    jobs = [
        (
            args.data,
            d,
            t,
            s,
            args.budgets.get(t, args.budget),
            args.ciq_config,
            args.earlier_budget if args.transfer else None,
        )
        for d in datasets
        for t in args.tuner_names
        for s in range(args.seeds)
    ]
    start = time.perf_counter()
    runs = run_jobs(_run_job, jobs, args.workers)
    summary = summarise(args.data, runs)
    summary["meta"] = {
        "command": " ".join(["python -m bench.search_efficiency", *(argv or sys.argv[1:])]),
        "seeds": args.seeds,
        "budget": args.budget,
        "tuner_budgets": args.budgets,
        "ciq_config": args.ciq_config,
        "transfer": {"earlier_budget": args.earlier_budget} if args.transfer else None,
        "machine": f"{machine()}, {args.workers} workers",
        "wall_s": time.perf_counter() - start,
    }
    write_report(args.out, summary, markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
