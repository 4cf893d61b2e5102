"""Transfer in the replay harness: each dataset is searched after an earlier search of the same
kernel on another GPU, as a user who tuned that kernel before would start.

The earlier search is the default strategy's, `EARLIER_BUDGET` evaluations on a sibling dataset
(another file of the same folder: the same kernel and space on another GPU), the sibling chosen
by the seed in turn, with its own seed (`EARLIER_SEED` + seed). Every tuner starts from the same
configurations of it, chosen by the engine's rule (`ciq_tune.engine.transfer.transfer_genes`):
ours through `transfer_from`, Optuna's samplers as enqueued trials, random search as its first
draws; so a peer's count differs from ours only by what each does after those.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.ciq import ENGINE_TUNERS
from bench.ciq import METRIC
from bench.ciq import drive
from bench.ciq import engine_tuner
from bench.peers import Tuner
from bench.peers import run_optuna_nsga2
from bench.peers import run_optuna_tpe
from bench.peers import run_random
from bench.replay import BenchError
from bench.replay import Problem
from bench.replay import Replay
from bench.replay import list_datasets
from bench.replay import load_module
from bench.replay import load_problem
from ciq_tune.engine import Budget
from ciq_tune.engine import Objective
from ciq_tune.engine import SearchResults
from ciq_tune.engine import create_engine
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.transfer import transfer_genes

EARLIER_BUDGET = 100
EARLIER_SEED = 1000


@dataclass(frozen=True)
class EarlierSearch:
    """The earlier search a run of `problem` with `seed` starts from (see the module docstring).

    Attributes:
        data: the benchdata folder.
        budget: evaluations of the earlier search.
    """

    data: str
    budget: int = EARLIER_BUDGET

    def source(self, problem: Problem, seed: int) -> str:
        """The sibling dataset searched earlier: another file of `problem`'s folder with the
        same parameters, recorded on another GPU (a copy of the same GPU's data in another
        format is no earlier search), chosen by `seed` in turn."""
        folder = str(Path(problem.name).parent)
        registry = load_module(self.data).DATASETS

        def gpu(name: str) -> str:
            return str(registry.get(name, {}).get("gpu", name))

        siblings = [
            name
            for name in list_datasets(self.data, [f"{folder}/*"])
            if gpu(name) != gpu(problem.name)
            and load_problem(self.data, name).params == problem.params
        ]
        if not siblings:
            raise BenchError(
                f"dataset {problem.name} has no sibling with its parameters in {folder}/: "
                "transfer needs the same kernel recorded on another GPU"
            )
        return siblings[seed % len(siblings)]

    def __call__(self, problem: Problem, seed: int) -> SearchResults:
        return _earlier_results(self.data, self.source(problem, seed), seed, self.budget)

    def start(self, problem: Problem, seed: int) -> list[dict[str, Any]]:
        """The configurations every tuner starts from, best first (the engine's rule)."""
        limit = EngineConfig().transfer_points
        genes = transfer_genes(self(problem, seed), problem.space, limit)
        return [problem.space.decode(g) for g in genes]


@functools.cache
def _earlier_results(data: str, source: str, seed: int, budget: int) -> SearchResults:
    problem = load_problem(data, source)
    replay = Replay(problem, budget)
    engine = create_engine(
        "auto",
        problem.space,
        [Objective(name=METRIC, mode="min")],
        budget=Budget(max_evaluations=replay.budget),
        seed=EARLIER_SEED + seed,
    )
    drive(engine, replay)
    return engine.result()


def transfer_tuners(earlier: EarlierSearch, ciq_config: dict[str, Any] | None) -> dict[str, Tuner]:
    """The tuners that can start from an earlier search, by name, each starting from `earlier`
    (Kernel Tuner's strategies take no warm start)."""

    def started(run: Callable[..., Replay]) -> Tuner:
        return lambda problem, budget, seed: run(
            problem, budget, seed, earlier.start(problem, seed)
        )

    engines = {
        name: engine_tuner(strategy, ciq_config if name == "ciq" else None, earlier)
        for name, strategy in ENGINE_TUNERS.items()
    }
    return {
        **engines,
        "random": started(run_random),
        "optuna_tpe": started(run_optuna_tpe),
        "optuna_nsga2": started(run_optuna_nsga2),
    }


def summarise_runs(runs: Path) -> list[dict[str, Any]]:
    """One row per `ciq-tune tune` output folder `ARM-SEED` under `runs` (scripts/gpu/
    transfer.sh): evaluations, the search's own best value (optimistic: one round each), the
    evaluation that first came within 2 % of the best value of all the runs, and the winner
    re-measured against the default where the run re-measured it."""
    import pandas as pd

    from ciq_tune.strict_io import load_yaml

    found = []
    for folder in sorted(p for p in runs.iterdir() if p.is_dir()):
        controls = load_yaml(next(folder.glob("*.controls.yaml")))
        metric = controls["benchmark"]["metric"]
        table = pd.read_csv(folder / "evaluations.csv").sort_values("candidate_id")
        values = table[metric].where(table["status"] == "ok").to_numpy(dtype=float)
        found.append((folder.name, values, controls["scores"].get("remeasured") or {}))
    overall = min(float(np.nanmin(values)) for _, values, _ in found)
    rows = []
    for name, values, again in found:
        arm, _, seed = name.rpartition("-")
        within = (values <= 1.02 * overall).nonzero()[0]
        rows.append(
            {
                "arm": arm,
                "seed": int(seed),
                "evaluations": len(values),
                "search_best": float(np.nanmin(values)),
                "evals_to_within_2pct_of_all_runs_best": int(within[0]) + 1
                if len(within)
                else None,
                "shipped_speedup_remeasured": again.get("speedup"),
                "speedup_ci": again.get("speedup_ci"),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """python -m bench.transfer RUNS OUT_CSV: `summarise_runs` as a CSV and a printed table."""
    import sys

    import pandas as pd

    runs, out = (argv if argv is not None else sys.argv[1:])[:2]
    frame = pd.DataFrame(summarise_runs(Path(runs)))
    frame.to_csv(out, index=False)
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
