"""Median unique evaluations until the default strategy's best is within a fraction of a
recorded space's optimum, each run stopped there.

The count is the replay harness's "evaluations to 95 %" (`bench/search_efficiency.py`), run by
the same tuner (`bench.ciq.engine_tuner`), but a run ends when it gets there instead of going
on to the budget: several times faster for a strategy whose ranking costs more per pick, and
for choosing its settings. `--against` puts the tuners of a harness run beside it, per family
(median over every file's runs, as the harness pools them), with the ratio.

    python -m bench.to_target --seeds 30 --datasets "*kt_rtx/gemm/*" "*kt_rtx/convolution/*" \\
        --against docs/data/search_efficiency/kt_rtx_cold_30seeds.json --out to95.json
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.ciq import engine_tuner
from bench.metrics import evals_to
from bench.metrics import median_evals
from bench.replay import DEFAULT_DATA
from bench.replay import list_datasets
from bench.replay import load_problem
from bench.script import script_parser
from bench.transfer import EarlierSearch


def _count(job: tuple[str, str, int, int, float, dict[str, Any], bool]) -> int | None:
    data, dataset, seed, budget, target, config, transfer = job
    problem = load_problem(data, dataset)
    earlier = EarlierSearch(data) if transfer else None
    replay = engine_tuner("auto", config, earlier, until=target)(problem, budget, seed)
    return evals_to(replay.trace, target)


def _family(dataset: str) -> str:
    return str(Path(dataset).parent)


def _harness_medians(path: str, target: float) -> dict[str, dict[str, float | None]]:
    """Per dataset and per family, each tuner's median count in a harness run's JSON."""
    summary = json.loads(Path(path).read_text())
    key = f"evals_to_{round(target * 100)}"
    medians = {
        d: {t: m.get(key) for t, m in e["tuners"].items()} for d, e in summary["datasets"].items()
    }
    medians.update(
        {f: {t: m.get(key) for t, m in ts.items()} for f, ts in summary["families"].items()}
    )
    return medians


def _line(name: str, ours: float | None, peers: dict[str, float | None]) -> str:
    line = f"{name}: ours {ours}"
    for tuner, theirs in sorted(peers.items()):
        line += f"; {tuner} {theirs}" + (f" = {ours / theirs:.2f}x" if ours and theirs else "")
    return line


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser("python -m bench.to_target", __doc__)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="benchdata folder with load.py")
    parser.add_argument("--datasets", nargs="+", required=True, help="globs of dataset paths")
    parser.add_argument("--seeds", type=int, required=True, help="runs per dataset (0, 1, …)")
    parser.add_argument("--budget", type=int, default=250, help="unique evaluations per run")
    parser.add_argument("--target", type=float, default=0.95, help="fraction of the optimum")
    parser.add_argument("--config", default="{}", help="settings of the default, as JSON")
    parser.add_argument(
        "--transfer",
        action="store_true",
        help="start every run from an earlier search of the kernel on another GPU "
        "(bench/transfer.py, as the harness's --transfer)",
    )
    parser.add_argument("--against", help="a search_efficiency JSON with the peers' runs")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", required=True, help="JSON file of every run's count")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.budget < 1 or not 0 < args.target <= 1:
        parser.error("--seeds and --budget must be positive and --target in (0, 1]")
    config = json.loads(args.config)
    datasets = list_datasets(args.data, args.datasets)
    jobs = [
        (args.data, d, s, args.budget, args.target, config, args.transfer)
        for d in datasets
        for s in range(args.seeds)
    ]
    with ProcessPoolExecutor(max_workers=max(args.workers, 1)) as pool:
        counts = list(pool.map(_count, jobs))
    runs = [{"dataset": j[1], "seed": j[2], "count": c} for j, c in zip(jobs, counts, strict=True)]
    meta = {"config": config, "target": args.target, "transfer": args.transfer}
    Path(args.out).write_text(json.dumps({**meta, "runs": runs}))
    peers = _harness_medians(args.against, args.target) if args.against else {}
    print(f"evaluations to {args.target:.0%} (median; None = not reached by half the runs)")
    families: dict[str, list[int | None]] = {}
    for dataset in datasets:
        own = [c for j, c in zip(jobs, counts, strict=True) if j[1] == dataset]
        families.setdefault(_family(dataset), []).extend(own)
        print("  " + _line(dataset, median_evals(own), peers.get(dataset, {})))
    for family, pooled in families.items():
        print(_line(family, median_evals(pooled), peers.get(family, {})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
