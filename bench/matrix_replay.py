"""A matrix search replayed on its exhaustive sweep: how close the default search's per-shape
choices come to the sweep's per-shape optimum at each budget, without a GPU.

    python3 -m bench.matrix_replay examples/kernels/triton/matmul_llm.yaml SWEEP \
        --budgets 50 100 160 --seeds 0 1 2 3 4

SWEEP is the output folder of a finished exhaustive sweep (`bench/sweep.sh`), or one recorded
under docs/data/matrix_sweeps/: its evaluations.csv answers every configuration at every shape
with the values recorded there (a cut-off round's value included, as a search would have seen
it). The engine is the one `ciq-tune tune` makes (`searchers.local_search.kernel_engine`: the
default strategy, the description's starting points first, the per-shape descent beside it),
told each configuration's weighted geometric mean over the shapes with the per-shape values,
one evaluation at a time. Per budget, over the seeds: the weighted geometric mean over the
shapes of optimum / value of the configuration the search would choose there (the best it
evaluated at that shape; 1.0: every shape's optimum found). The sweep's values are single
rounds, so this measures the search, not the re-measured result (`bench.matrix_exhaustive`).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from objectives import load_description
from objectives import make_search_space
from objectives import starting_points
from objectives.matrix import descent_shapes
from searchers.local_search import kernel_engine
from searchers.matrix_search import matrix_metric

Values = dict[str, list[float | None]]


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


def quality(chosen: list[float | None], optimum: list[float], weights: list[float]) -> float:
    """Weighted geometric mean over shapes of optimum / chosen value (a shape with none: 0)."""
    if any(c is None for c in chosen):
        return 0.0
    logs = [w * math.log(o / c) for o, c, w in zip(optimum, chosen, weights, strict=True) if c]
    return math.exp(sum(logs) / sum(weights))


def replay(desc: Any, values: Values, budgets: list[int], seed: int) -> dict[int, float]:
    """One search of max(`budgets`) evaluations on the record: its quality at each budget."""
    weights = [s.weight for s in desc.matrix()]
    n = len(weights)
    optimum = [min(v for row in values.values() if (v := row[i]) is not None) for i in range(n)]
    at_first = desc.at_shape(desc.matrix()[0])
    space = make_search_space(at_first)
    metric = matrix_metric(desc)
    engine = kernel_engine(
        space=space,
        metric=metric,
        mode=desc.mode,
        budget=max(budgets),
        seed=seed,
        points_to_evaluate=starting_points(at_first, space),
        workers=1,
        shapes=descent_shapes(desc),
    )
    best: list[float | None] = [None] * n
    out = {}
    told = 0
    while not engine.finished:
        candidate = engine.ask()
        if candidate is None:
            break
        per_shape = values.get(canonical(candidate.config))
        if per_shape is None or any(v is None for v in per_shape):
            engine.tell(candidate.id, None, status="error")
        else:
            logs = sum(w * math.log(v) for w, v in zip(weights, per_shape, strict=True) if v)
            per_shape_info = {f"{desc.metric}@{i}": v for i, v in enumerate(per_shape)}
            engine.tell(candidate.id, {metric: math.exp(logs / sum(weights))}, info=per_shape_info)
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
    parser.add_argument("description", type=Path)
    parser.add_argument("sweep", type=Path, help="a finished exhaustive sweep's --out folder")
    parser.add_argument("--budgets", type=int, nargs="+", default=[50, 100, 160])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args(argv)
    desc = load_description(args.description)
    values = sweep_values(args.sweep, len(desc.matrix()))
    runs = [replay(desc, values, sorted(args.budgets), seed) for seed in args.seeds]
    print(f"{desc.name}: {len(values)} configurations recorded, seeds {args.seeds}")
    print("| budget | optimum / chosen, median | min | max |\n|---|---|---|---|")
    for budget in sorted(args.budgets):
        got = [run[budget] for run in runs if budget in run]
        if got:
            print(f"| {budget} | {statistics.median(got):.3f} | {min(got):.3f} | {max(got):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
