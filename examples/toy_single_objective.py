"""The single-objective toy of CompileIQ's getting-started guide, on Ray Tune.

    python examples/toy_single_objective.py

Minimises x² + y; the optimum is 2.0 at x=1, y=1 (z does not matter).
"""

from __future__ import annotations

import ray
from ray import tune

import ciq_tune.space as ss
from ciq_tune import CompileIQSearcher


def objective(config: dict) -> dict:
    return {"score": config["x"] ** 2 + config["y"]}


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False)
    searcher = CompileIQSearcher(
        space={
            "x": ss.range(1.0, 20.0, 0.5),
            "y": ss.choice([1, 2, 3]),
            "z": ss.literal("flag", knockout_prob=0.5),
        },
        metric="score",
        mode="min",
        generations=15,
        pool_size=12,
        seed=0,
    )
    tune.Tuner(
        objective,
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            num_samples=-1,
            reuse_actors=True,
            max_concurrent_trials=2,  # one per CPU of ray.init(num_cpus=2)
        ),
        run_config=tune.RunConfig(name="toy", verbose=1),
    ).fit()
    results = searcher.results()
    best = results.best(1)[0]
    print(f"{len(results)} evaluations; best score {best.values['score']} at {best.config}")


if __name__ == "__main__":
    main()
