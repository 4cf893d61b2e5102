"""A battery of synthetic search spaces with known optima, run for every engine strategy.

    python -m bench.battery --seeds 20 --budget 800 --workers 2 --out docs/data/battery.json

Each space stresses one kind of geometry a kernel space has: wide integer and half-step ranges
(>= 400 values), log ranges, continuous values (a bowl, a valley, three basins, beside discrete
ones), ordinals of powers of two, categories, conditional parameters, constraints leaving
<= 10 % feasible, a region where 30 % of the space fails, several basins, knocked-out literals.
Per space and strategy, over seeds: the median and the worst seed's regret (best value found -
optimum) after 25…800 evaluations, next to random search on the same seeds with the p-value of
a deficit against every seed it ran (one-sided Mann-Whitney U), and how many seeds reach the
optimum within 200 evaluations.

The worst of a few dozen seeds is one draw from a wide tail: random search's own worst of 40
seeds at 100 evaluations on `conditional` was 4.01 on seeds 100-139 and 5.00 on seeds
1000-1039. With `--random-seeds` at least `POOL_FACTOR` times `--seeds`, random search runs on
that many seeds, its table row stays on the others' seeds, and each worst seed also gets the
chance that random search's worst of as many seeds is as bad (`worst_behind_random_p`,
estimated from the pool): below `SIGNIFICANT`, the worst seed is beyond random search's tail.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

import ciq_tune.space as ss
from bench.script import machine
from bench.script import run_jobs
from bench.script import script_parser
from bench.script import write_report
from ciq_tune.engine import STRATEGIES
from ciq_tune.engine import Budget
from ciq_tune.engine import create_engine
from ciq_tune.space import SearchSpace

SEARCHING = sorted(set(STRATEGIES) - {"exhaustive"})
"""The strategies the battery runs by default: every one that searches rather than lists."""
BUDGETS = (25, 50, 100, 200, 400, 800)
# "Found the optimum within" this many evaluations (issue 13's must-show).
FOUND_WITHIN = 200
# A median behind random search's is marked as a real deficit (a dagger) below this p-value,
# and a worst seed beyond random search's tail (a double dagger).
SIGNIFICANT = 0.05
# The random search pool that estimates the tail of its worst of n seeds has at least this
# many times n seeds: the tail that matters is its 1/n quantile.
POOL_FACTOR = 10

Objective = Callable[[Mapping[str, Any]], float | None]


@dataclass(frozen=True)
class BatteryProblem:
    """A synthetic space with a known optimum.

    Attributes:
        name: short identifier.
        what: the geometry it stresses, in words.
        space: the search space.
        objective: configuration → value to minimise, or None when the configuration fails.
        optimum: the smallest value over the feasible space.
        tolerance: regret at or below which the optimum counts as found (0 for discrete
            spaces; continuous optima are reached only approximately).
        single_basin: whether the issue's "finds the optimum in >= 19/20 seeds" applies.
    """

    name: str
    what: str
    space: SearchSpace
    objective: Objective
    optimum: float
    tolerance: float = 0.0
    single_basin: bool = True


def _grid_optimum(space: SearchSpace, objective: Objective) -> float:
    """The optimum of a finite space by enumeration."""
    values = (objective(space.flat(g)) for g in space.iter_genes())
    return min(v for v in values if v is not None)


def _squared_distance(c: Mapping[str, Any], cx: float, cy: float) -> float:
    """The squared distance of a configuration's point (x, y) from the point (cx, cy)."""
    return (c["x"] - cx) ** 2 + (c["y"] - cy) ** 2


def _toy_wide() -> BatteryProblem:
    space = SearchSpace(
        {
            "x": ss.range(1.0, 200.0, 0.5),
            "y": ss.choice([1, 2, 3]),
            "z": ss.literal("flag", knockout_prob=0.5),
        }
    )
    return BatteryProblem(
        "toy_wide",
        "issue 13's toy: x² + y, x half-steps 1…200 (399 values), y categorical, z knockout",
        space,
        lambda c: c["x"] ** 2 + c["y"],
        2.0,
    )


def _int_wide() -> BatteryProblem:
    space = SearchSpace({"a": ss.range(0, 999), "b": ss.range(-500, 499)})
    return BatteryProblem(
        "int_wide",
        "two integer ranges of 1000 values, tilted bowl, optimum inside",
        space,
        lambda c: (c["a"] - 737) ** 2 + 3 * (c["b"] + 123) ** 2 + (c["a"] - 737) * (c["b"] + 123),
        0.0,
    )


def _half_step() -> BatteryProblem:
    space = SearchSpace({"x": ss.range(-100.0, 100.0, 0.5), "y": ss.range(-50.0, 50.0, 0.5)})
    return BatteryProblem(
        "half_step",
        "half-step ranges of 401 and 201 values",
        space,
        lambda c: (c["x"] - 37.5) ** 2 + (c["y"] + 12.5) ** 2 + 0.5 * (c["x"] - 37.5) * c["y"],
        _half_step_optimum(),
    )


def _half_step_optimum() -> float:
    x = np.arange(-100.0, 100.5, 0.5)[:, None]
    y = np.arange(-50.0, 50.5, 0.5)[None, :]
    return float(((x - 37.5) ** 2 + (y + 12.5) ** 2 + 0.5 * (x - 37.5) * y).min())


def _log_range() -> BatteryProblem:
    space = SearchSpace(
        {"lr": ss.log_sampling(1e-5, 1.0, 400), "wd": ss.log_sampling(1e-6, 0.1, 400)}
    )

    def objective(c: Mapping[str, Any]) -> float:
        return (math.log10(c["lr"]) + 2.7) ** 2 + 2 * (math.log10(c["wd"]) + 4.2) ** 2

    return BatteryProblem(
        "log_range",
        "two log-spaced ranges of 400 values over 5 decades",
        space,
        objective,
        _grid_optimum(space, objective),
    )


def _continuous_params() -> dict[str, Any]:
    """The three continuous values of every `continuous*` problem (one on a log scale)."""
    return {
        "u": ss.uniform(-5.0, 5.0),
        "v": ss.uniform(-5.0, 5.0),
        "w": ss.uniform(0.01, 100.0, log=True),
    }


def _offsets(c: Mapping[str, Any]) -> tuple[float, float, float]:
    """u, v and log10 w minus their values at `continuous`'s optimum."""
    return c["u"] - 1.234, c["v"] + 2.5, math.log10(c["w"]) - 0.7


def _continuous() -> BatteryProblem:
    return BatteryProblem(
        "continuous",
        "three continuous values (one on a log scale); found = regret <= 1e-3",
        SearchSpace(_continuous_params()),
        lambda c: sum(d**2 for d in _offsets(c)),
        0.0,
        tolerance=1e-3,
    )


def _continuous_valley() -> BatteryProblem:
    space = _continuous().space

    def objective(c: Mapping[str, Any]) -> float:
        # A tilted valley (10:1 across its floor) that rises linearly far from the optimum:
        # neither separable nor quadratic, unlike `continuous`.
        a, b, w = _offsets(c)
        return math.sqrt(1 + (a + b) ** 2 + 10 * (a - b) ** 2 + (a + w) ** 2) - 1

    return BatteryProblem(
        "continuous_valley",
        "the same three continuous values, a tilted valley, not quadratic; found = regret <= 1e-3",
        space,
        objective,
        0.0,
        tolerance=1e-3,
    )


# (centre in u, v, log10 w; depth; width) of each quadratic basin of `continuous_basins`.
_CONTINUOUS_BASINS = (
    ((1.234, -2.5, 0.7), 0.0, 0.5),
    ((-3.0, 3.0, -1.0), 0.5, 1.0),
    ((3.5, 2.0, 1.5), 1.0, 4.0),
)


def _continuous_basins() -> BatteryProblem:
    def objective(c: Mapping[str, Any]) -> float:
        x = (c["u"], c["v"], math.log10(c["w"]))
        return min(
            depth + sum((a - b) ** 2 for a, b in zip(x, centre, strict=True)) / width
            for centre, depth, width in _CONTINUOUS_BASINS
        )

    return BatteryProblem(
        "continuous_basins",
        "the same three continuous values, three basins; the global one is the narrowest",
        _continuous().space,
        objective,
        0.0,
        tolerance=1e-3,
        single_basin=False,
    )


_MIXED_CATEGORY = {"a": 1.0, "b": 0.0, "c": 2.0}


def _continuous_mixed() -> BatteryProblem:
    space = SearchSpace(
        {**_continuous_params(), "k": ss.choice(list(_MIXED_CATEGORY)), "n": ss.range(0, 63)}
    )

    def objective(c: Mapping[str, Any]) -> float:
        a, b, w = _offsets(c)
        rest = _MIXED_CATEGORY[c["k"]] + 0.01 * (c["n"] - 40) ** 2
        return (a + b) ** 2 + 4 * (a - b) ** 2 + w**2 + rest

    return BatteryProblem(
        "continuous_mixed",
        "the three continuous values beside a category and a 64-value range, a tilted bowl; "
        "found = regret <= 1e-3",
        space,
        objective,
        0.0,
        tolerance=1e-3,
    )


_POW2_TARGETS = (7, 3, 9, 5, 1)


def _powers_of_two() -> BatteryProblem:
    space = SearchSpace(
        {f"p{i}": ss.ordinal([2**k for k in range(11)]) for i in range(len(_POW2_TARGETS))}
    )

    def objective(c: Mapping[str, Any]) -> float:
        e = [math.log2(c[f"p{i}"]) - t for i, t in enumerate(_POW2_TARGETS)]
        return sum(v**2 for v in e) + 0.5 * (e[0] - e[1]) ** 2

    return BatteryProblem(
        "powers_of_two",
        "five ordinals of 11 powers of two (1…1024), coupled",
        space,
        objective,
        0.0,
    )


def _categorical() -> BatteryProblem:
    rng = np.random.default_rng(1234)
    sizes = (6, 8, 5, 7)
    space = SearchSpace(
        {f"c{i}": ss.choice([f"v{k}" for k in range(n)]) for i, n in enumerate(sizes)}
    )
    costs = [rng.uniform(0, 10, n) for n in sizes]
    pair = rng.uniform(0, 5, (sizes[0], sizes[1]))

    def objective(c: Mapping[str, Any]) -> float:
        idx = [int(c[f"c{i}"][1:]) for i in range(len(sizes))]
        return float(sum(costs[i][k] for i, k in enumerate(idx)) + pair[idx[0], idx[1]])

    return BatteryProblem(
        "categorical",
        "four unordered categories (6, 8, 5, 7 values), one pairwise interaction",
        space,
        objective,
        _grid_optimum(space, objective),
    )


def _conditional() -> BatteryProblem:
    space = SearchSpace(
        {
            "algo": ss.choice(["direct", "split_k", "stream_k"]),
            "split": ss.conditional(ss.range(2, 401), when="algo == 'split_k'"),
            "chunks": ss.conditional(ss.range(1, 400), when="algo == 'stream_k'"),
            "tile": ss.ordinal([16, 32, 64, 128, 256]),
        }
    )

    def objective(c: Mapping[str, Any]) -> float:
        tile = (math.log2(c["tile"]) - 6) ** 2
        if c["algo"] == "split_k":
            return 20 + ((c["split"] - 173) / 10) ** 2 + tile
        if c["algo"] == "stream_k":
            return 24 + ((c["chunks"] - 40) / 20) ** 2 + tile
        return 40 + tile

    return BatteryProblem(
        "conditional",
        "a categorical choosing which of two 400-value ranges exists (a basin per branch)",
        space,
        objective,
        20.0,
        single_basin=False,
    )


def _constrained() -> BatteryProblem:
    space = SearchSpace({"x": ss.range(0, 199), "y": ss.range(0, 199)}, constraints=["x + y <= 60"])

    def objective(c: Mapping[str, Any]) -> float:
        return _squared_distance(c, 45, 40)

    return BatteryProblem(
        "constrained",
        "two 200-value ranges, x + y <= 60 leaves 4.7 % feasible, optimum on the boundary",
        space,
        objective,
        _grid_optimum(space, objective),
    )


def _failures() -> BatteryProblem:
    space = SearchSpace({"x": ss.range(0, 299), "y": ss.range(0, 299)})

    def objective(c: Mapping[str, Any]) -> float | None:
        if c["x"] >= 210:  # 90 of 300 values of x: 30 % of the space fails to compile
            return None
        return _squared_distance(c, 205, 150)

    return BatteryProblem(
        "failures",
        "30 % of the space fails (x >= 210), optimum 5 steps from the failing region",
        space,
        objective,
        0.0,
    )


_BASINS = (
    (80, 400, 0.0, 40.0),
    (300, 100, 5.0, 4000.0),
    (420, 420, 8.0, 4000.0),
    (150, 200, 10.0, 8000.0),
)


def _multi_basin() -> BatteryProblem:
    space = SearchSpace({"x": ss.range(0, 499), "y": ss.range(0, 499)})

    def objective(c: Mapping[str, Any]) -> float:
        return min(depth + _squared_distance(c, cx, cy) / width for cx, cy, depth, width in _BASINS)

    return BatteryProblem(
        "multi_basin",
        "four basins on 500 x 500 values; the global one is the narrowest",
        space,
        objective,
        0.0,
        single_basin=False,
    )


_FLAG_WANTED = (True, False, True, True, False, False)


def _knockout() -> BatteryProblem:
    spec: dict[str, Any] = {"x": ss.range(0, 499)}
    spec.update({f"f{i}": ss.literal(f"-f{i}", knockout_prob=0.5) for i in range(6)})
    space = SearchSpace(spec)

    def objective(c: Mapping[str, Any]) -> float:
        flags = sum((i + 1) * ((f"f{i}" in c) != w) for i, w in enumerate(_FLAG_WANTED))
        return ((c["x"] - 321) / 10) ** 2 + flags

    return BatteryProblem(
        "knockout",
        "a 500-value range and six knocked-out literals, three of which must be passed",
        space,
        objective,
        0.0,
    )


@functools.cache
def battery() -> dict[str, BatteryProblem]:
    """Every problem of the battery, by name (built once per process: the optima of the
    finite spaces are found by enumerating up to 160 000 configurations)."""
    makers = (
        _toy_wide,
        _int_wide,
        _half_step,
        _log_range,
        _continuous,
        _continuous_valley,
        _continuous_basins,
        _continuous_mixed,
        _powers_of_two,
        _categorical,
        _conditional,
        _constrained,
        _failures,
        _multi_basin,
        _knockout,
    )
    problems = [make() for make in makers]
    return {p.name: p for p in problems}


def regret_trace(
    problem: BatteryProblem,
    strategy: str,
    seed: int,
    budget: int,
    config: Mapping[str, Any] | None = None,
) -> list[float]:
    """Regret of the best value found after each evaluation (inf before the first success).

    Strategies for several objectives get the objective twice (their ranking then reduces to
    the single objective's order).

    Args:
        problem: the battery problem.
        strategy: an engine strategy name.
        seed: the engine's seed.
        budget: evaluations.
        config: strategy settings; the strategy's defaults if None.
    """
    n_obj = STRATEGIES[strategy].min_objectives
    objectives = ["f"] if n_obj == 1 else [f"f{i}" for i in range(n_obj)]
    engine = create_engine(
        strategy,
        problem.space,
        objectives,
        config=dict(config or {}),
        budget=Budget(max_evaluations=budget),
        seed=seed,
    )
    best = math.inf
    trace: list[float] = []
    while not engine.finished:
        candidate = engine.ask()
        if candidate is None:
            raise RuntimeError(f"{strategy} returned no candidate with nothing out")
        value = problem.objective(problem.space.flat(candidate.genes))
        if value is None:
            engine.tell(candidate.id, None, status="compile_error")
        else:
            engine.tell(candidate.id, [value] * n_obj)
            best = min(best, value - problem.optimum)
        trace.append(max(best, 0.0))
    return trace + [trace[-1]] * (budget - len(trace))


def found_within(trace: Sequence[float], tolerance: float, evaluations: int) -> bool:
    """Whether the regret reached `tolerance` within the first `evaluations` entries."""
    return any(r <= tolerance + 1e-12 for r in trace[:evaluations])


def _job(job: tuple[str, str, int, int, dict[str, Any]]) -> dict[str, Any]:
    name, strategy, seed, budget, config = job
    problem = battery()[name]
    start = time.perf_counter()
    trace = regret_trace(problem, strategy, seed, budget, config)
    return {
        "problem": name,
        "strategy": strategy,
        "seed": seed,
        "trace": trace,
        "seconds": time.perf_counter() - start,
    }


def summarise(runs: Sequence[Mapping[str, Any]], budget: int) -> dict[str, Any]:
    """Median and worst regret per problem, strategy and budget; seeds finding the optimum;
    next to random search, the one-sided Mann-Whitney U p-value of "this strategy's regrets
    are larger than random search's" at each budget (`behind_random_p`): with 20 seeds a
    median a little above random search's is often noise.

    Random search's row covers the seeds the other strategies ran (all of its own when it ran
    alone); the p-values use every seed it ran (its pool). With a pool of at least
    `POOL_FACTOR` times a strategy's seeds, that strategy's worst seed also gets
    `worst_behind_random_p` (`_worst_behind_p`)."""
    problems = battery()
    traces: dict[str, dict[str, dict[int, list[float]]]] = {}
    for r in runs:
        traces.setdefault(r["problem"], {}).setdefault(r["strategy"], {})[r["seed"]] = r["trace"]
    budgets = [b for b in BUDGETS if b <= budget]
    out: dict[str, Any] = {}
    for name, by_strategy in traces.items():
        compared = {s for strategy, t in by_strategy.items() if strategy != "random" for s in t}
        pool = by_strategy.get("random", {})
        random = np.array([pool[s] for s in sorted(pool)]) if pool else None
        for strategy, by_seed in by_strategy.items():
            seeds = sorted(by_seed)
            if strategy == "random" and compared:
                seeds = [s for s in seeds if s in compared]
            runs_of = np.array([by_seed[s] for s in seeds])
            row: dict[str, Any] = {
                "seeds": len(runs_of),
                "median": {b: float(np.median(runs_of[:, b - 1])) for b in budgets},
                "worst": {b: float(np.max(runs_of[:, b - 1])) for b in budgets},
                "found": int(
                    sum(
                        found_within(t, problems[name].tolerance, min(FOUND_WITHIN, budget))
                        for t in runs_of
                    )
                ),
            }
            if strategy == "random" and len(pool) > len(seeds):
                row["pool"] = len(pool)
            if random is not None and strategy != "random":
                row["behind_random_p"] = {
                    b: _behind_p(runs_of[:, b - 1], random[:, b - 1]) for b in budgets
                }
                if len(random) >= POOL_FACTOR * len(runs_of):
                    row["worst_behind_random_p"] = {
                        b: _worst_behind_p(row["worst"][b], random[:, b - 1], len(runs_of))
                        for b in budgets
                    }
            out.setdefault(name, {})[strategy] = row
    return out


def _behind_p(ours: np.ndarray, random: np.ndarray) -> float:
    """One-sided Mann-Whitney U p-value of "ours are larger than random search's" (1 where
    every regret is the same: nothing to tell apart)."""
    if np.ptp(np.concatenate([ours, random])) == 0:
        return 1.0
    return float(stats.mannwhitneyu(ours, random, alternative="greater").pvalue)


def _worst_behind_p(worst: float, pool: np.ndarray, n: int) -> float:
    """The chance that the worst of `n` random search seeds is at least `worst`: 1 - F^n, F the
    share of `pool` (random search's regrets, one per seed) strictly below it. The p-value of
    "this worst seed is worse than random search's would be" (the worst of n as the
    statistic, under the hypothesis that the seeds are random search's)."""
    below = float(np.mean(pool < worst - 1e-12))
    return 1.0 - below**n


def _cell(value: float) -> str:
    if value == 0:
        return "0"
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def markdown(summary: Mapping[str, Any], budget: int) -> str:
    """One row per problem and strategy: median / worst regret at each budget (bold where
    worse than random search at that budget, a dagger where that median's deficit is
    significant), seeds finding the optimum within 200."""
    budgets = [b for b in BUDGETS if b <= budget]
    head = " | ".join(f"@{b}" for b in budgets)
    lines = [
        "Regret (best value - optimum), median / worst seed; **bold**: worse than random "
        f"search at that budget; †: behind random search in distribution (one-sided Mann-Whitney "
        f"U, p < {SIGNIFICANT}); ‡: a worst seed beyond random search's tail (its worst of as "
        f"many seeds at least as bad with a chance < {SIGNIFICANT}, from its pool). found: seeds "
        f"at the optimum within {FOUND_WITHIN}.",
        "",
        f"| problem | strategy | {head} | found |",
        "|---|---|" + "---|" * len(budgets) + "---|",
    ]
    for name, by_strategy in summary.items():
        random = by_strategy.get("random")
        for strategy, row in by_strategy.items():
            cells = []
            for b in budgets:
                med, worst = row["median"][b], row["worst"][b]
                text_med, text_worst = _cell(med), _cell(worst)
                if random is not None and med > random["median"][b] + 1e-12:
                    dagger = "†" if row["behind_random_p"][b] < SIGNIFICANT else ""
                    text_med = f"**{text_med}**{dagger}"
                if random is not None and worst > random["worst"][b] + 1e-12:
                    text_worst = f"**{text_worst}**"
                if row.get("worst_behind_random_p", {}).get(b, 1.0) < SIGNIFICANT:
                    text_worst += "‡"
                cells.append(f"{text_med} / {text_worst}")
            pool = f" (pool {row['pool']} seeds)" if "pool" in row else ""
            found = f"{row['found']}/{row['seeds']}"
            lines.append(f"| {name} | {strategy}{pool} | {' | '.join(cells)} | {found} |")
    return "\n".join(lines) + "\n"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = script_parser("python -m bench.battery", __doc__)
    parser.add_argument("--seeds", type=int, default=20, help="runs per problem and strategy")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first-seed, … (split)")
    parser.add_argument(
        "--random-seeds",
        type=int,
        default=None,
        help=f"random search's seeds (default --seeds); at least {POOL_FACTOR} x --seeds "
        "also tests each worst seed against random search's tail",
    )
    parser.add_argument("--budget", type=int, default=max(BUDGETS), help="evaluations per run")
    parser.add_argument(
        "--strategies",
        default=",".join(SEARCHING),
        help="comma-separated names (default: every strategy but `exhaustive`, which lists "
        "only spaces without a continuous parameter)",
    )
    parser.add_argument("--problems", default="", help="comma-separated names (default: all)")
    parser.add_argument(
        "--config", default="{}", help="strategy settings as JSON, for tuning one strategy"
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", required=True, help="JSON file; the table goes beside it (.md)")
    args = parser.parse_args(argv)
    args.strategy_names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [s for s in args.strategy_names if s not in STRATEGIES]
    if unknown:
        parser.error(
            f"--strategies names unknown strategies {unknown}; known: {sorted(STRATEGIES)}"
        )
    known = battery()
    args.problem_names = [p.strip() for p in args.problems.split(",") if p.strip()] or list(known)
    missing = [p for p in args.problem_names if p not in known]
    if missing:
        parser.error(f"--problems names unknown problems {missing}; known: {list(known)}")
    if args.seeds < 1 or args.budget < 1:
        parser.error(f"--seeds and --budget must be positive, got {args.seeds}, {args.budget}")
    if args.random_seeds is None:
        args.random_seeds = args.seeds
    elif "random" not in args.strategy_names or args.random_seeds < args.seeds:
        parser.error(
            "--random-seeds needs 'random' in --strategies and at least --seeds seeds (its "
            f"table row is on the others' seeds), got {args.random_seeds} with --seeds "
            f"{args.seeds} and --strategies {args.strategies}"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    jobs = [
        (p, s, seed, args.budget, json.loads(args.config))
        for p in args.problem_names
        for s in args.strategy_names
        for seed in range(
            args.first_seed, args.first_seed + (args.random_seeds if s == "random" else args.seeds)
        )
    ]
    start = time.perf_counter()
    runs = run_jobs(_job, jobs, args.workers)
    summary = summarise(runs, args.budget)
    seconds: dict[str, float] = {}
    for run in runs:
        seconds[run["strategy"]] = seconds.get(run["strategy"], 0.0) + run["seconds"]
    report = {
        "summary": summary,
        "meta": {
            "command": " ".join(["python -m bench.battery", *(argv or sys.argv[1:])]),
            "machine": f"{machine()}, {args.workers} workers",
            "wall_s": time.perf_counter() - start,
            "cpu_s_per_strategy": seconds,
        },
    }
    write_report(args.out, report, markdown(summary, args.budget))
    return 0


if __name__ == "__main__":
    sys.exit(main())
