"""CompileIQSearcher with Ray's ASHA scheduler: iterative trials stopped early when they lag.

    python examples/asha_early_stopping.py

Each trial reports a refined estimate per iteration (as a benchmark with growing repetitions
would); ASHA stops the poor ones early, and the searcher learns from their last report. The
space is Tune's `param_space` and the metric is TuneConfig's, which the scheduler and the
searcher share.
"""

from __future__ import annotations

import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler

from ciq_tune import CompileIQSearcher


def iterative(config: dict) -> None:
    true_value = (config["x"] - 7) ** 2 + config["y"]
    for step in range(1, 9):
        tune.report({"loss": true_value * (1 + 1 / step)})


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False)
    searcher = CompileIQSearcher(max_evaluations=40, seed=0)
    grid = tune.Tuner(
        iterative,
        param_space={"x": tune.randint(0, 21), "y": tune.choice([0.5, 1.0, 2.0])},
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            scheduler=ASHAScheduler(max_t=8, grace_period=1, reduction_factor=2),
            metric="loss",
            mode="min",
            num_samples=-1,
            max_concurrent_trials=2,  # one per CPU of ray.init(num_cpus=2)
        ),
        run_config=tune.RunConfig(name="asha", verbose=1),
    ).fit()
    iterations = [r.metrics["training_iteration"] for r in grid]
    print(f"{len(grid)} trials, {sum(i < 8 for i in iterations)} stopped early by ASHA")
    print("best:", searcher.results().best(1)[0].config)


if __name__ == "__main__":
    main()
