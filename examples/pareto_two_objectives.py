"""A two-objective search (NSGA-II): a synthetic kernel's run time against its energy.

    python examples/pareto_two_objectives.py

Larger tiles run faster but draw more power; the search returns the trade-off curve.
Metrics and modes are lists on the searcher; TuneConfig's metric/mode stay unset.
"""

from __future__ import annotations

import ray
from ray import tune

import ciq_tune.space as ss
from ciq_tune import CompileIQSearcher


def kernel_model(config: dict) -> dict:
    tile = config["tile"]
    # A knocked-out flag is absent from the config (the option is not passed).
    time_ms = 4.0 / tile**0.5 + 0.1 * config["stages"] + (0.3 if "unroll" in config else 0.5)
    power_w = 100 + 30 * tile**0.5 + 8 * config["stages"]
    return {"time_ms": time_ms, "energy_mj": time_ms * power_w}


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False)
    searcher = CompileIQSearcher(
        space={
            "tile": ss.log_sampling(16, 256, 5),
            "stages": ss.range(1, 5),
            "unroll": ss.literal(True, knockout_prob=0.5),
        },
        metric=["time_ms", "energy_mj"],
        mode=["min", "min"],
        generations=5,
        pool_size=12,
        seed=0,
    )
    tune.Tuner(
        kernel_model,
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            num_samples=-1,
            reuse_actors=True,
            max_concurrent_trials=2,  # one per CPU of ray.init(num_cpus=2)
        ),
        run_config=tune.RunConfig(name="pareto", verbose=1),
    ).fit()
    front = sorted(searcher.results().pareto_front(), key=lambda r: r.values["time_ms"])
    print(f"Pareto front ({len(front)} points):")
    for record in front:
        print(
            f"  {record.values['time_ms']:.3f} ms  {record.values['energy_mj']:.1f} mJ  "
            f"{record.config}"
        )


if __name__ == "__main__":
    main()
