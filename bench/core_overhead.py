"""Issue 2 must-show: searcher overhead and Tune throughput next to OptunaSearch.

    python -m bench.core_overhead [--evaluations 2000] [--trials 200]

1. Median time of one `suggest` + `on_trial_complete` of CompileIQSearcher, driven directly,
   with pool size 64 and 20 parameters (no Tune), beside OptunaSearch (TPE) on the same space.
2. Trials per second of a Tune run on a trivial trainable with `reuse_actors=True`, with
   CompileIQSearcher and with OptunaSearch, in the same process; prints the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from ray import tune
from ray.tune.search import Searcher

import ciq_tune.space as ss
from ciq_tune import CompileIQSearcher

N_PARAMS = 20


def _parameter(i: int) -> tuple[ss.Parameter, Any]:
    """Parameter `i` in ciq-tune's terms and in Tune's, the same domain: the parameters cycle
    through an integer range, a category, a flag (passed or not) and a float."""
    kind = i % 4
    if kind == 0:
        return ss.range(1, 64), tune.randint(1, 65)
    if kind == 1:
        return ss.choice(["a", "b", "c", "d"]), tune.choice(["a", "b", "c", "d"])
    if kind == 2:
        return ss.literal(f"-flag{i}", knockout_prob=0.5), tune.choice([None, f"-flag{i}"])
    return ss.uniform(0.0, 1.0), tune.uniform(0.0, 1.0)


def ciq_space() -> dict:
    return {f"p{i}": _parameter(i)[0] for i in range(N_PARAMS)}


def tune_space() -> dict:
    return {f"p{i}": _parameter(i)[1] for i in range(N_PARAMS)}


def score(config: dict) -> float:
    return sum(v for v in config.values() if isinstance(v, (int, float)) and v is not None)


def time_direct(searcher: Searcher, n: int) -> list[float]:
    times = []
    for i in range(n):
        start = time.perf_counter()
        config = searcher.suggest(f"t{i}")
        if not isinstance(config, dict):
            raise RuntimeError(f"{type(searcher).__name__} gave no configuration: {config!r}")
        searcher.on_trial_complete(f"t{i}", {"score": score(config)})
        times.append((time.perf_counter() - start) * 1e3)
    return times


def trials_per_second(searcher: Searcher, trials: int) -> float:
    start = time.perf_counter()
    tune.Tuner(
        lambda c: {"score": score(c)},
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            num_samples=trials,
            metric="score",
            mode="min",
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(verbose=0),
    ).fit()
    return trials / (time.perf_counter() - start)


def main() -> None:
    from ray.tune.search.optuna import OptunaSearch

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--evaluations", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--strategy", default="auto", help="engine strategy (default: auto)")
    args = parser.parse_args()

    ciq = CompileIQSearcher(
        space=ciq_space(),
        metric="score",
        mode="min",
        pool_size=64,
        strategy=args.strategy,
        max_evaluations=args.evaluations + 1,
        seed=0,
    )
    ciq_ms = time_direct(ciq, args.evaluations)
    print(
        f"CompileIQSearcher ({ciq.engine.name}) suggest+complete: median "
        f"{statistics.median(ciq_ms):.3f} ms, mean {statistics.mean(ciq_ms):.3f} ms, max "
        f"{max(ciq_ms):.1f} ms over {args.evaluations} (pool 64, {N_PARAMS} parameters)"
    )
    optuna = OptunaSearch(space=tune_space(), metric="score", mode="min", seed=0)
    optuna_n = min(args.evaluations, 300)  # TPE's cost grows with the history
    optuna_ms = time_direct(optuna, optuna_n)
    print(
        f"OptunaSearch (TPE) suggest+complete: median {statistics.median(optuna_ms):.3f} ms "
        f"over {optuna_n}"
    )

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ciq_tps = trials_per_second(
        CompileIQSearcher(
            space=ciq_space(),
            metric="score",
            mode="min",
            pool_size=64,
            strategy=args.strategy,
            max_evaluations=args.trials,
            seed=0,
        ),
        args.trials,
    )
    optuna_tps = trials_per_second(
        OptunaSearch(space=tune_space(), metric="score", mode="min", seed=0), args.trials
    )
    print(f"Tune throughput, trivial trainable, reuse_actors=True, {args.trials} trials:")
    print(
        f"  CompileIQSearcher ({args.strategy}) {ciq_tps:.1f} trials/s, "
        f"OptunaSearch {optuna_tps:.1f} trials/s, ratio {ciq_tps / optuna_tps:.2f}"
    )


if __name__ == "__main__":
    main()
