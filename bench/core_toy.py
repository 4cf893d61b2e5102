"""Issue 2 and 13 must-shows: the toy x² + y reaches its optimum 2.0 within 200 evaluations.

    python -m bench.core_toy --seeds 20 --budget 200 [--through-tune 3]
    python -m bench.core_toy --wide --seeds 20 --budget 200 --through-tune 20   # issue 13

`--wide` widens x to `range(1.0, 200.0, 0.5)` (399 values), issue 13's toy.

Runs the default engine (`screened`) directly for every seed and, optionally, the first few seeds
through Ray Tune with CompileIQSearcher, and prints evaluations-to-optimum per seed.
"""

from __future__ import annotations

import argparse
import statistics

import ciq_tune.space as ss
from ciq_tune.engine import Budget
from ciq_tune.engine import create_engine

SPACE = {
    "x": ss.range(1.0, 20.0, 0.5),
    "y": ss.choice([1, 2, 3]),
    "z": ss.literal("flag", knockout_prob=0.5),
}
WIDE_SPACE = {**SPACE, "x": ss.range(1.0, 200.0, 0.5)}
OPTIMUM = 2.0


def toy(config: dict) -> float:
    return config["x"] ** 2 + config["y"]


def evals_to_optimum_engine(
    seed: int, budget: int, strategy: str = "auto", space: dict | None = None
) -> int | None:
    engine = create_engine(
        strategy, space or SPACE, "score", budget=Budget(max_evaluations=budget), seed=seed
    )
    count = 0
    while not engine.finished:
        candidate = engine.ask()
        if candidate is None:  # nothing to ask before a result comes back: cannot happen here
            break
        count += 1
        value = toy(candidate.config)
        engine.tell(candidate.id, value)
        if value == OPTIMUM:
            return count
    return None


def evals_to_optimum_tune(seed: int, budget: int, space: dict | None = None) -> int | None:
    from ray import tune

    from ciq_tune import CompileIQSearcher

    searcher = CompileIQSearcher(
        space=space or SPACE, metric="score", mode="min", max_evaluations=budget, seed=seed
    )
    tune.Tuner(
        lambda c: {"score": toy(c)},
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=-1, reuse_actors=True),
        run_config=tune.RunConfig(verbose=0),
    ).fit()
    for i, record in enumerate(searcher.results().records, start=1):
        if record.values and record.values["score"] == OPTIMUM:
            return i
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--through-tune", type=int, default=0, help="seeds also run in Tune")
    parser.add_argument("--strategy", default="auto", help="engine strategy (default: auto)")
    parser.add_argument("--wide", action="store_true", help="x over 1…200 in half steps")
    args = parser.parse_args()
    space = WIDE_SPACE if args.wide else SPACE
    found = [
        evals_to_optimum_engine(seed, args.budget, args.strategy, space)
        for seed in range(args.seeds)
    ]
    hits = [n for n in found if n is not None]
    print(f"engine: optimum reached in {len(hits)}/{args.seeds} seeds within {args.budget} evals")
    print(f"engine: evaluations to optimum per seed: {found}")
    if hits:
        print(f"engine: median {statistics.median(hits)}, max {max(hits)}")
    if args.through_tune:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        tuned = []
        for seed in range(args.through_tune):
            tuned.append(evals_to_optimum_tune(seed, args.budget, space))
            print(f"tune:   seed {seed}: evaluations to optimum {tuned[-1]}", flush=True)
        reached = sum(n is not None for n in tuned)
        print(f"tune:   optimum reached in {reached}/{args.through_tune} seeds")
        print(f"tune:   evaluations to optimum per seed: {tuned}")
        print(f"tune:   same as the engine for these seeds: {tuned == found[: args.through_tune]}")


if __name__ == "__main__":
    main()
