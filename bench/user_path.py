"""Issue 12 must-show: `CompileIQSearcher()` in a user's own Tuner, as the README shows it.

    python -m bench.user_path --space ray --num-samples 200 --max-concurrent 2
    python -m bench.user_path --space primitives --num-samples 200 --max-concurrent 2
    python -m bench.user_path --space mixed --num-samples 200          # no max_concurrent_trials
    python -m bench.user_path --space mixed --num-samples 40 --max-concurrent 2 --trial-s 1

Runs the toy objective x² + y through `tune.Tuner(objective, param_space=…,
tune_config=TuneConfig(search_alg=CompileIQSearcher(), metric=…, mode=…, num_samples=N))` on a
local Ray with 2 CPUs, and prints one JSON line: evaluations, the most trials running at once
(counted by a Tune callback between `on_trial_start` and `on_trial_complete`/`on_trial_error`),
wall time of `fit()`, and the error if the search did not run. The toy returns in microseconds,
so Tune finishes each trial in the step that starts it and the count stays 1 whatever the slots;
`--trial-s S` makes every trial take S seconds (a sleep), which shows how many run at once.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import ray
from ray import tune

import ciq_tune.space as ss
from ciq_tune import CompileIQSearcher

# The same toy three ways: Ray Tune domains in param_space; ciq-tune primitives with a
# constraint in `space=` (param_space holds a constant); both joined.
RAY = {"x": tune.quniform(1.0, 20.0, 0.5), "y": tune.choice([1, 2, 3])}
PRIMITIVES = {
    "x": ss.range(1.0, 20.0, 0.5),
    "y": ss.choice([1, 2, 3]),
    "z": ss.literal("flag", knockout_prob=0.5),
}
# space name -> (searcher's space=, Tuner's param_space)
SPACES: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {
    "ray": (None, RAY),
    "primitives": (PRIMITIVES, {"label": "toy"}),
    "mixed": ({k: PRIMITIVES[k] for k in ("y", "z")}, {"x": RAY["x"], "label": "toy"}),
}


def objective(config: dict[str, Any]) -> dict[str, float]:
    return {"score": config["x"] ** 2 + config["y"]}


def slow_objective(trial_s: float) -> Any:
    """The toy taking `trial_s` seconds per trial (a sleep: no CPU used)."""

    def objective_taking_time(config: dict[str, Any]) -> dict[str, float]:
        time.sleep(trial_s)
        return objective(config)

    return objective_taking_time


class ConcurrencyProbe(tune.Callback):
    """Counts trials between start and end; keeps the maximum."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.running += 1
        self.peak = max(self.peak, self.running)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.running -= 1

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.running -= 1


def run(
    space: str, num_samples: int, max_concurrent: int | None, trial_s: float = 0.0
) -> dict[str, Any]:
    probe = ConcurrencyProbe()
    row: dict[str, Any] = {
        "space": space,
        "num_samples": num_samples,
        "max_concurrent_trials": max_concurrent,
        "trial_s": trial_s,
    }
    given, param_space = SPACES[space]
    searcher = CompileIQSearcher(
        space=given, constraints=["x * y <= 200"] if given is not None else ()
    )
    started = time.perf_counter()
    try:
        grid = tune.Tuner(
            slow_objective(trial_s) if trial_s > 0 else objective,
            param_space=param_space,
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                metric="score",
                mode="min",
                num_samples=num_samples,
                max_concurrent_trials=max_concurrent,
            ),
            run_config=tune.RunConfig(verbose=0, callbacks=[probe]),
        ).fit()
    except Exception as exc:  # the "before" state fails here; the row says how
        row.update(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return row
    row["wall_s"] = round(time.perf_counter() - started, 1)
    row["evaluations"] = len(grid)
    row["errors"] = sum(1 for i in range(len(grid)) if grid[i].error is not None)
    row["peak_running"] = probe.peak
    best = grid.get_best_result(metric="score", mode="min")
    row["best"] = best.metrics.get("score") if best.metrics else None
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", choices=sorted(SPACES), default="ray")
    parser.add_argument("--num-samples", type=int, default=200)
    parser.add_argument("--max-concurrent", type=int)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument(
        "--trial-s", type=float, default=0.0, help="seconds each trial sleeps (default 0)"
    )
    args = parser.parse_args()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        row = run(args.space, args.num_samples, args.max_concurrent, args.trial_s)
        print(json.dumps(row), flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
