"""Issue 49 must-show: the engine keeps pace. The default engine's own time per suggestion
(`ask` + `tell`, not the objective) on a listed space of more than 10,000 feasible
configurations, up to 1,000 evaluations, per window of evaluations.

    python -m bench.engine_pace [--dataset benchmark_hub/dedispersion_milo/A100.json.gz] \\
        [--evaluations 1000] [--seeds 0 1 2] [--in-flight 1] [--window 100] [--out pace.json]

The space is a recorded one from ../shared/benchdata (read in place, never copied): by default
dedispersion_milo A100, whose 11,130 feasible configurations the default strategy lists and
ranks by its Gaussian process (`engine/screened.py`, `ranking`), answered from the record
(failed or unmeasured configurations are told as errors). `--in-flight 8` keeps up to 8
candidates out (the oldest is told first); a generational engine hands out at most a
generation, so the table says how many were out at most. Per window (evaluations 0-100,
100-200, ...) the table gives the median, 95th percentile, max and mean in ms of the
suggestions proposed in it, pooled over the seeds, then each seed's total. A generational
engine breeds a whole generation in the `tell` that completes the one before, so that one
suggestion in `pool_size` carries the generation's cost: the mean is the cost a suggestion
amortises.

`--replay` instead times the search-efficiency replay of issue 49 ("8 recorded spaces x 10
seeds x 800 evaluations"). `bench/replay.py` has no command of its own and `bench/to_target.py`
stops each run at its target; the replay to 800 is the harness's, `python -m
bench.search_efficiency --tuners ciq --seeds 10 --budget 800`, over the kt_rtx convolution and
GEMM files as in docs/benchmarks.md's budget-800 runs (7 files; `--datasets` for others). It
times one run per file and seed of `--replay-seeds`, each to `--evaluations`, one at a time,
and estimates the whole replay's wall time from them (`--replay-full-seeds` runs per file
spread evenly over `--workers` processes):

    python -m bench.engine_pace --replay --evaluations 800 --replay-seeds 0
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import asdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.ciq import METRIC
from bench.ciq import engine_tuner
from bench.replay import DEFAULT_DATA
from bench.replay import BenchError
from bench.replay import Key
from bench.replay import Problem
from bench.replay import list_datasets
from bench.replay import load_problem
from bench.script import machine
from bench.script import script_parser
from ciq_tune.engine import Budget
from ciq_tune.engine import Objective
from ciq_tune.engine import create_engine

# 11,130 feasible configurations, all measured (benchdata README): the recorded space closest
# to the requirement's 10,000 that the default strategy lists (kt_rtx GEMM lists 17,956).
DEFAULT_DATASET = "benchmark_hub/dedispersion_milo/A100.json.gz"
DEFAULT_EVALUATIONS = 1000
DEFAULT_SEEDS = (0, 1, 2)
DEFAULT_WINDOW = 100
# The requirement: at most this many ms per suggestion at 1,000 evaluations.
TARGET_MS = 10.0
# The replay of issue 49 and the command that runs it (bench/search_efficiency.py).
REPLAY_SEEDS = 10
REPLAY_BUDGET = 800
REPLAY_DATASETS = ("*kt_rtx/convolution/*", "*kt_rtx/gemm/*")


@dataclass(frozen=True)
class PaceRun:
    """One ask/tell run of the default engine against a recorded space.

    Attributes:
        dataset: the recorded space's name.
        seed: the engine's seed.
        strategy: the strategy `create_engine("auto", ...)` picked.
        in_flight: at most this many candidates were kept out.
        most_in_flight: the most that were out at once.
        keys: the proposed configurations (value tuples in the dataset's order), in order.
        ms: the engine's time for each of them: the `ask` that handed it out plus its `tell`
            (an `ask` that handed out nothing is counted with the next one that does).
    """

    dataset: str
    seed: int
    strategy: str
    in_flight: int
    most_in_flight: int
    keys: list[Key]
    ms: list[float]


def pace_run(problem: Problem, seed: int, evaluations: int, in_flight: int = 1) -> PaceRun:
    """Drive the default engine (`create_engine("auto", ...)`, one objective) by ask/tell on
    `problem` to `evaluations`, keeping up to `in_flight` candidates out, and time each
    suggestion's `ask` and `tell` (the record's lookup is not timed).

    Args:
        problem: the recorded space (`bench.replay.load_problem`).
        seed: the engine's seed.
        evaluations: the budget (at most the feasible configurations).
        in_flight: candidates kept out at once; the oldest is told first.
    """
    if evaluations < 1 or in_flight < 1:
        raise BenchError(
            f"`evaluations` and `in_flight` must be at least 1, got evaluations={evaluations}, "
            f"in_flight={in_flight}"
        )
    engine = create_engine(
        "auto",
        problem.space,
        [Objective(name=METRIC, mode="min")],
        budget=Budget(max_evaluations=min(evaluations, len(problem.feasible))),
        seed=seed,
    )
    keys: list[Key] = []
    ms: list[float] = []
    index: dict[int, int] = {}
    out: deque[Any] = deque()
    carried = 0.0  # time of asks that handed out nothing
    most = 0
    clock = time.perf_counter
    while not engine.finished:
        while len(out) < in_flight:
            start = clock()
            candidate = engine.ask()
            elapsed = clock() - start
            if candidate is None:
                carried += elapsed
                break
            index[candidate.id] = len(keys)
            keys.append(problem.key(candidate.config))
            ms.append((elapsed + carried) * 1e3)
            carried = 0.0
            out.append(candidate)
        most = max(most, len(out))
        if not out:
            raise BenchError(f"engine {engine.name!r} handed out nothing with nothing out")
        candidate = out.popleft()
        value = problem.times[keys[index[candidate.id]]]
        start = clock()
        if value is None:
            engine.tell(candidate.id, None, status="error")
        else:
            engine.tell(candidate.id, {METRIC: value})
        ms[index[candidate.id]] += (clock() - start) * 1e3
    return PaceRun(problem.name, seed, engine.name, in_flight, most, keys, ms)


@dataclass(frozen=True)
class Window:
    """The ms per suggestion of the suggestions `start` to `stop` - 1, over the runs."""

    start: int
    stop: int
    median: float
    p95: float
    max: float
    mean: float


def window_stats(runs: Sequence[PaceRun], width: int) -> list[Window]:
    """Per window of `width` evaluations (by proposal order), the median, 95th percentile, max
    and mean ms per suggestion over every run's suggestions in it."""
    longest = max((len(r.ms) for r in runs), default=0)
    rows = []
    for start in range(0, longest, width):
        ms = np.array([v for r in runs for v in r.ms[start : start + width]])
        rows.append(
            Window(
                start,
                min(start + width, longest),
                float(np.median(ms)),
                float(np.percentile(ms, 95)),
                float(ms.max()),
                float(ms.mean()),
            )
        )
    return rows


def table(runs: Sequence[PaceRun], width: int) -> str:
    """The markdown table of `window_stats`, then each run's total."""
    lines = [
        "| evaluations | median ms | p95 ms | max ms | mean ms |",
        "|---|---|---|---|---|",
    ]
    for w in window_stats(runs, width):
        lines.append(
            f"| {w.start}-{w.stop} | {w.median:.2f} | {w.p95:.1f} | {w.max:.1f} | {w.mean:.2f} |"
        )
    for r in runs:
        lines.append(
            f"\nseed {r.seed}: {len(r.ms)} suggestions, {sum(r.ms) / 1e3:.1f} s of engine time "
            f"in all (mean {statistics.fmean(r.ms):.2f} ms), strategy {r.strategy}, "
            f"at most {r.most_in_flight} out (of {r.in_flight} allowed)"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class ReplayTime:
    """The wall time of one run of the harness's `ciq` tuner (`bench.ciq.engine_tuner`)."""

    dataset: str
    seed: int
    evaluations: int
    seconds: float


def replay_times(
    data: str | Path,
    datasets: Sequence[str],
    seeds: Sequence[int],
    budget: int,
    done: Callable[[ReplayTime], None] | None = None,
) -> list[ReplayTime]:
    """Time one run of the default tuner per dataset and seed, to `budget`, as the harness
    (`bench.search_efficiency`) runs it (the record loaded before the clock starts); `done`
    is called with each run's time as it ends."""
    out = []
    for dataset in datasets:
        problem = load_problem(data, dataset)
        for seed in seeds:
            start = time.perf_counter()
            replay = engine_tuner("auto")(problem, budget, seed)
            seconds = time.perf_counter() - start
            out.append(ReplayTime(dataset, seed, len(replay.seen), seconds))
            if done is not None:
                done(out[-1])
    return out


def replay_estimate(times: Sequence[ReplayTime], seeds: int, workers: int) -> float:
    """Estimated wall seconds of the whole replay: every dataset's mean run time x `seeds`
    runs, spread over `workers` processes."""
    per_dataset: dict[str, list[float]] = {}
    for t in times:
        per_dataset.setdefault(t.dataset, []).append(t.seconds)
    total = sum(statistics.fmean(v) * seeds for v in per_dataset.values())
    return total / max(workers, 1)


def replay_command(datasets: Sequence[str], seeds: int, budget: int, workers: int) -> str:
    globs = " ".join(f'"{d}"' for d in datasets)
    return (
        f"python -m bench.search_efficiency --tuners ciq --seeds {seeds} --budget {budget} "
        f"--workers {workers} --datasets {globs} --out replay_{budget}.json"
    )


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = script_parser("python -m bench.engine_pace", __doc__)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="benchdata folder with load.py")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="the recorded space to time")
    parser.add_argument("--evaluations", type=int, default=None, help="evaluations per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS))
    parser.add_argument("--in-flight", type=int, default=1, help="candidates kept out at once")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="evaluations a row")
    parser.add_argument("--out", help="JSON file of every run's times and proposals")
    parser.add_argument("--replay", action="store_true", help="time the replay instead")
    parser.add_argument("--datasets", nargs="+", default=list(REPLAY_DATASETS))
    parser.add_argument("--replay-seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--replay-full-seeds", type=int, default=REPLAY_SEEDS)
    parser.add_argument("--workers", type=int, default=2, help="processes of the whole replay")
    args = parser.parse_args(argv)
    if args.evaluations is None:
        args.evaluations = REPLAY_BUDGET if args.replay else DEFAULT_EVALUATIONS
    if args.evaluations < 1 or args.in_flight < 1 or args.window < 1 or args.workers < 1:
        parser.error(
            "--evaluations, --in-flight, --window and --workers must be at least 1, got "
            f"{args.evaluations}, {args.in_flight}, {args.window}, {args.workers}"
        )
    return args


def _replay_main(args: argparse.Namespace) -> int:
    datasets = list_datasets(args.data, args.datasets)
    print(
        "the replay: "
        + replay_command(args.datasets, args.replay_full_seeds, REPLAY_BUDGET, args.workers)
    )
    print(f"({len(datasets)} files; machine: {machine()})")

    def done(t: ReplayTime) -> None:
        print(f"  {t.dataset} seed {t.seed}: {t.evaluations} evaluations in {t.seconds:.1f} s")
        sys.stdout.flush()

    times = replay_times(args.data, datasets, args.replay_seeds, args.evaluations, done)
    estimate = replay_estimate(times, args.replay_full_seeds, args.workers)
    print(
        f"estimated: {len(datasets)} files x {args.replay_full_seeds} seeds x "
        f"{args.evaluations} evaluations on {args.workers} workers: {estimate / 60:.1f} min "
        "(ideal split; each run's time as measured here, one at a time)"
    )
    if args.out:
        Path(args.out).write_text(
            json.dumps({"machine": machine(), "times": [asdict(t) for t in times]}, indent=1)
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    try:
        if args.replay:
            return _replay_main(args)
        problem = load_problem(args.data, args.dataset)
        runs = [pace_run(problem, s, args.evaluations, args.in_flight) for s in args.seeds]
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"{problem.name}: {len(problem.feasible)} feasible configurations, "
        f"{args.evaluations} evaluations, seeds {args.seeds}, up to {args.in_flight} out; "
        f"engine ms per suggestion (ask + tell); machine: {machine()}\n"
    )
    print(table(runs, args.window))
    last = window_stats(runs, args.window)[-1]
    print(
        f"\nlast window ({last.start}-{last.stop}): median {last.median:.2f} ms, "
        f"p95 {last.p95:.1f} ms, mean {last.mean:.2f} ms (target: {TARGET_MS:g} ms)"
    )
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {"machine": machine(), "runs": [asdict(r) for r in runs]}, indent=1, default=str
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
