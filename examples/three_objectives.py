"""Three objectives on a real kernel: run time × compile time × energy (CompileIQ's Pareto front).

    python examples/three_objectives.py [DESCRIPTION] [--budget N]

Tunes a Triton kernel description (default: the fp16 matmul at M=16 of the LLM matrix) for
``time_ms`` (median of a round), ``compile_s`` and ``energy_mj`` (NVML energy counter, mJ per
call; measured only on a GPU, so without one the example says so and stops) with NSGA-II, and
prints the Pareto front. Tail latency is one metric away: use ``p95_ms`` or ``p99_ms`` instead
of ``time_ms``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import ray
from ray import tune

from ciq_tune import CompileIQSearcher
from objectives import load_description
from objectives import make_search_space
from objectives import make_trainable
from objectives import starting_points

METRICS = ["time_ms", "compile_s", "energy_mj"]
DEFAULT = Path(__file__).parent / "kernels/triton/matmul_llm.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("description", nargs="?", default=str(DEFAULT))
    parser.add_argument("--budget", type=int, default=48)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("energy_mj is read from NVML: this example needs an NVIDIA GPU")
    desc = load_description(args.description)
    if desc.shapes:  # one shape of a matrix: M=16 of the LLM matmul
        desc = desc.at_shape(desc.matrix()[1])
    space = make_search_space(desc)
    ray.init(include_dashboard=False, log_to_driver=False)
    searcher = CompileIQSearcher(
        space=space,
        metric=METRICS,
        mode=["min", "min", "min"],
        max_evaluations=args.budget,
        points_to_evaluate=starting_points(desc, space),
        seed=0,
    )
    trainable = make_trainable(desc, energy=True)
    tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1, "gpu": 1}),
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=-1, reuse_actors=True),
        run_config=tune.RunConfig(name="three_objectives", verbose=0),
    ).fit()
    front = [r for r in searcher.results().pareto_front() if r.values is not None]
    front.sort(key=lambda r: r.values["time_ms"] if r.values else 0.0)
    print(f"{desc.name} at {desc.sizes}: Pareto front ({len(front)} points, search values)")
    for record in front:
        v = record.values or {}
        print(
            f"  {v['time_ms']:.4f} ms  {v['compile_s']:.2f} s compile  {v['energy_mj']:.3f} mJ"
            f"  {record.config}"
        )
    ray.shutdown()


if __name__ == "__main__":
    main()
