"""Resume an interrupted search with `Tuner.restore`: the budget is kept, nothing is repeated.

    python examples/resume_interrupted.py

The first run is interrupted (as Ctrl+C would) after 15 trials; the second call restores the
experiment, the searcher's state included, and finishes the 40-evaluation budget. The space is
Tune's `param_space` of Ray Tune domains, as for any Tune searcher.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from pathlib import Path

import ray
from ray import tune

from ciq_tune import CompileIQSearcher


def objective(config: dict) -> dict:
    return {"score": (config["x"] - 3) ** 2 + config["y"]}


class InterruptOnce(tune.Callback):
    """Sends SIGINT once, after `after` trials completed (a stand-in for Ctrl+C)."""

    def __init__(self, after: int, marker: str) -> None:
        self.after, self.marker, self.done = after, marker, 0

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self.done += 1
        if self.done >= self.after and not os.path.exists(self.marker):
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGINT)


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False)
    storage = tempfile.mkdtemp(prefix="ciq-resume-")
    first = tune.Tuner(
        objective,
        param_space={"x": tune.randint(-10, 11), "y": tune.choice([1, 2, 3])},
        tune_config=tune.TuneConfig(
            search_alg=CompileIQSearcher(max_evaluations=40, seed=0),
            metric="score",
            mode="min",
            num_samples=-1,
            max_concurrent_trials=2,
            reuse_actors=True,  # one Ray worker per slot, not one per trial (seconds each)
        ),
        run_config=tune.RunConfig(
            name="resume",
            storage_path=storage,
            verbose=0,
            callbacks=[InterruptOnce(15, os.path.join(storage, "interrupted"))],
        ),
    ).fit()
    print(f"interrupted after {len(first)} trials")
    grid = tune.Tuner.restore(os.path.join(storage, "resume"), objective).fit()
    configs = {json.dumps(r.config, sort_keys=True) for r in grid}
    print(f"after restore: {len(grid)} trials, {len(configs)} distinct configurations")
    best = grid.get_best_result()
    print(f"best score {best.metrics['score']} at {best.config}")


if __name__ == "__main__":
    main()
