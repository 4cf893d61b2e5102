"""A matrix search replayed on recorded values: how close the default search's per-shape
choices come to the per-shape optimum at each budget, without a GPU.

    python3 -m bench.matrix_replay --sweep examples/kernels/triton/matmul_llm.yaml SWEEP \
        --budgets 50 100 160 --seeds 0 1 2 3 4
    python3 -m bench.matrix_replay --benchdata ../shared/benchdata \
        benchmark_hub/kt_rtx/gemm/RTX_3090.json.gz benchmark_hub/kt_rtx/gemm/RTX_Titan.json.gz

`--sweep DESC SWEEP`: SWEEP is the output folder of a finished exhaustive sweep of DESC
(`bench/sweep.sh`), or one recorded under docs/data/matrix_sweeps/: its evaluations.csv answers
every configuration at every shape with the values recorded there (a cut-off round's value
included, as a search would have seen it); the search starts from the description's starting
points, and descends per shape where its selection is ``per_shape``. `--benchdata DIR NAME …`:
one kernel's space recorded on several GPUs (`bench.replay.load_problem`), each GPU a shape of
weight 1: where GPUs disagree on the best configuration as shapes do, a check that a change to
the matrix search generalises beyond the sweep it was made on.

The engine is the one `ciq-tune tune` makes (`searchers.local_search.kernel_engine`: the
default strategy, with the per-shape descent beside it unless `--without-descent`), told each
configuration's weighted geometric mean over the shapes with the per-shape values, one
evaluation at a time. Per budget, over the seeds: the weighted geometric mean over the shapes of
optimum / value of the configuration the search would choose there (the best it evaluated at
that shape; 1.0: every shape's optimum found). Recorded values are single measurements, so this
measures the search, not the re-measured result (`bench.matrix_exhaustive`).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import statistics
import sys
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.replay import load_problem
from ciq_tune.space import SearchSpace
from objectives import load_description
from objectives import make_search_space
from objectives import starting_points
from objectives.matrix import descent_shapes
from searchers.local_search import kernel_engine
from searchers.plan import SearchPlan

Values = dict[str, list[float | None]]


@dataclass(frozen=True)
class RecordedMatrix:
    """A matrix whose every configuration's value at every shape was recorded.

    Attributes:
        name: what the table's first line names.
        space: the search space.
        points: the search's starting points.
        weights: each shape's weight.
        descends: whether `tune` runs the per-shape descent on it.
        values: a configuration → its value at each shape (None where it failed), or None
            when it was not recorded (a failure).
    """

    name: str
    space: SearchSpace
    points: list[Any]
    weights: list[float]
    descends: bool
    values: Callable[[Any], list[float | None] | None]

    def optimum(self, configurations: Sequence[list[float | None]]) -> list[float]:
        """Each shape's best recorded value."""
        return [
            min(v for row in configurations if (v := row[i]) is not None)
            for i in range(len(self.weights))
        ]


def canonical(config: Any) -> str:
    """A configuration as one key: its JSON with empty control catalogs dropped."""
    controls = {k: v for k, v in (config.get("controls") or {}).items() if v}
    return json.dumps({"params": config.get("params", {}), "controls": controls}, sort_keys=True)


def sweep_values(folder: Path, shapes: int) -> Values:
    """Configuration (`canonical`) → its value at each shape (None where it failed), from the
    folder's evaluations.csv (or evaluations.csv.gz, as recorded under docs/data)."""
    values: Values = {}
    table = folder / "evaluations.csv"
    with table.open() if table.exists() else gzip.open(f"{table}.gz", "rt") as handle:
        for row in csv.DictReader(handle):
            per_shape = []
            for i in range(shapes):
                text = row.get(f"time_ms@{i}") or ""
                value = float(text) if text else math.nan
                per_shape.append(value if math.isfinite(value) else None)
            values[canonical(json.loads(row["config_json"]))] = per_shape
    return values


def from_sweep(description: Path, sweep: Path) -> tuple[RecordedMatrix, list[list[float | None]]]:
    """A description's matrix answered by its exhaustive sweep, and every recorded row."""
    desc = load_description(description)
    values = sweep_values(sweep, len(desc.matrix()))
    at_first = desc.at_shape(desc.matrix()[0])
    space = make_search_space(at_first)
    matrix = RecordedMatrix(
        name=f"{desc.name}: {len(values)} configurations recorded",
        space=space,
        points=starting_points(at_first, space),
        weights=[s.weight for s in desc.matrix()],
        descends=bool(descent_shapes(desc)),
        values=lambda config: values.get(canonical(config)),
    )
    return matrix, list(values.values())


def from_benchdata(
    data: Path, names: Sequence[str]
) -> tuple[RecordedMatrix, list[list[float | None]]]:
    """One kernel's space recorded on several GPUs, each GPU a shape of weight 1."""
    problems = [load_problem(data, name) for name in names]
    first = problems[0]
    if any(p.params != first.params or set(p.feasible) != set(first.feasible) for p in problems):
        raise SystemExit(f"--benchdata {' '.join(names)}: not one space")

    def values(config: Any) -> list[float | None]:
        key = first.key(config)
        return [p.times.get(key) for p in problems]

    matrix = RecordedMatrix(
        name=f"{len(names)} GPUs of {first.name}: {len(first.feasible)} configurations",
        space=first.space,
        points=[],
        weights=[1.0] * len(problems),
        descends=True,
        values=values,
    )
    return matrix, [values(first.config(key)) for key in first.feasible]


def quality(chosen: list[float | None], optimum: list[float], weights: list[float]) -> float:
    """Weighted geometric mean over shapes of optimum / chosen value (a shape with none: 0)."""
    if any(c is None for c in chosen):
        return 0.0
    logs = [w * math.log(o / c) for o, c, w in zip(optimum, chosen, weights, strict=True) if c]
    return math.exp(sum(logs) / sum(weights))


def replay(
    matrix: RecordedMatrix, optimum: list[float], budgets: list[int], seed: int, descent: bool
) -> dict[int, float]:
    """One search of max(`budgets`) evaluations on the record: its quality at each budget."""
    weights = matrix.weights
    keys = [f"value@{i}" for i in range(len(weights))]
    plan = SearchPlan(matrix.space, "value_geomean", "min", max(budgets), seed, matrix.points)
    engine = kernel_engine(
        plan,
        workers=1,
        shapes=dict(zip(keys, weights, strict=True)) if descent and matrix.descends else None,
    )
    best: list[float | None] = [None] * len(weights)
    out = {}
    told = 0
    while not engine.finished:
        candidate = engine.ask()
        if candidate is None:
            break
        per_shape = matrix.values(candidate.config)
        if per_shape is None or any(v is None for v in per_shape):
            engine.tell(candidate.id, None, status="error")
        else:
            logs = sum(w * math.log(v) for w, v in zip(weights, per_shape, strict=True) if v)
            info = dict(zip(keys, per_shape, strict=True))
            engine.tell(candidate.id, math.exp(logs / sum(weights)), info=info)
            best = [
                v if b is None or (v is not None and v < b) else b
                for b, v in zip(best, per_shape, strict=True)
            ]
        told += 1
        if told in budgets:
            out[told] = quality(best, optimum, weights)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--sweep", nargs=2, type=Path, metavar=("DESC", "SWEEP"), help="a description's sweep"
    )
    source.add_argument(
        "--benchdata", nargs="+", metavar="DIR NAME", help="one space recorded on several GPUs"
    )
    parser.add_argument("--budgets", type=int, nargs="+", default=[50, 100, 160])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--without-descent", action="store_true", help="the engine alone (the comparison)"
    )
    args = parser.parse_args(argv)
    if args.sweep:
        matrix, rows = from_sweep(*args.sweep)
    elif len(args.benchdata) < 3:
        parser.error("--benchdata DIR NAME NAME …: a folder and at least two recorded spaces")
    else:
        matrix, rows = from_benchdata(Path(args.benchdata[0]), args.benchdata[1:])
    optimum = matrix.optimum(rows)
    budgets = sorted(args.budgets)
    descent = not args.without_descent
    runs = [replay(matrix, optimum, budgets, seed, descent) for seed in args.seeds]
    print(f"{matrix.name}, seeds {args.seeds}, {'with' if descent else 'without'} the descent")
    print("| budget | optimum / chosen, median | min | max |\n|---|---|---|---|")
    for budget in budgets:
        got = [run[budget] for run in runs if budget in run]
        if got:
            print(f"| {budget} | {statistics.median(got):.3f} | {min(got):.3f} | {max(got):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
