"""Tune a kernel description through Ray Tune + CompileIQSearcher, then re-measure the winners.

    python3 scripts/gpu/tune.py examples/kernels/triton/matmul.yaml --evals 60 \
        --default '{"params": {...}, "controls": {...}}' --out $OUT/matmul --cublas

Writes ``<out>.json`` (every trial's result plus the re-measurement) and prints a summary.
Re-measurement (GPU only) interleaves the default, the tuned configuration and, with
``--cublas``, ``torch.matmul`` on the description's inputs: ``--rounds`` rounds of
``do_bench(rep=50 ms)`` medians each, L2 cleared before every repetition.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray import tune

from objectives import load_description
from objectives import make_search_space
from objectives import make_trainable
from objectives._bench import compare
from objectives._bench import make_inputs
from objectives._bench import reference_outputs
from searchers.compileiq_searcher import CompileIQSearcher

# Metrics copied from each trial into the JSON record.
_KEEP = (
    "status",
    "time_ms",
    "iqr_ms",
    "cv",
    "n",
    "compile_s",
    "worker_spawn_s",
    "wall_s",
    "n_regs",
    "n_spills",
    "registers",
    "spill_bytes",
    "rel_err",
    "error",
    "energy_mj",
    "power_w",
    "helion_config",
)


def search(
    desc_path: str, evals: int, default: dict[str, Any], seed: int, budget_s: float | None
) -> dict[str, Any]:
    """Run the search; returns the trial records, the best config and the wall time."""
    desc = load_description(desc_path)
    space = make_search_space(desc)
    searcher = CompileIQSearcher(
        space=space,
        metric=desc.metric,
        mode=desc.mode,
        max_evaluations=evals,
        time_budget_s=budget_s,
        seed=seed,
        points_to_evaluate=[default],
    )
    import torch

    resources = {"cpu": 1, "gpu": 1 if torch.cuda.is_available() else 0}
    trainable = tune.with_resources(make_trainable(desc), resources)
    t0 = time.perf_counter()
    grid = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=-1, reuse_actors=True),
        run_config=tune.RunConfig(verbose=0, storage_path=str(Path("/tmp/ciq-ray").resolve())),
    ).fit()
    wall = time.perf_counter() - t0
    trials = []
    for res in grid:
        metrics = res.metrics or {}
        trials.append({"config": res.config, **{k: metrics.get(k) for k in _KEEP}})
    ok = [t for t in trials if t["status"] == "ok" and t["time_ms"] is not None]
    best = min(ok, key=lambda t: t["time_ms"]) if ok else None
    return {"trials": trials, "best": best, "search_wall_s": wall, "n_trials": len(trials)}


def _triton_launcher(desc: Any, config: dict[str, Any]) -> Any:
    from objectives.triton import make_launch

    # make_launch also gives Triton the scratch memory of device-side tensor descriptors.
    return make_launch(desc, config)


def _cuda_launcher(desc: Any, config: dict[str, Any]) -> Any:
    from objectives.cuda import make_launch

    return make_launch(desc, config)


def _helion_launcher(desc: Any, config: dict[str, Any]) -> Any:
    from objectives.helion import make_launch

    return make_launch(desc, config)


_LAUNCHERS = {"triton": _triton_launcher, "cuda": _cuda_launcher, "helion": _helion_launcher}


def remeasure(
    desc_path: str, variants: dict[str, dict[str, Any] | None], rounds: int
) -> dict[str, Any]:
    """Interleaved re-measurement; a None variant is torch.matmul (cuBLAS) on the inputs.

    Each variant's entry holds its summary and ``samples_ms``, the per-round medians (input of
    `ciq_tune.validation.compare_samples`).
    """
    import torch
    from triton.testing import do_bench

    desc = load_description(desc_path)
    make = _LAUNCHERS[desc.kind]
    inputs = make_inputs(desc, seed=12345, device="cuda")
    expected = reference_outputs(desc, inputs)
    launchers: dict[str, Any] = {}
    checks: dict[str, float] = {}
    for name, config in variants.items():
        if config is None:
            a, b = (inputs[s.name] for s in desc.inputs[:2])
            out = inputs[desc.outputs[0]]

            def cublas(tensors: dict[str, Any], a: Any = a, b: Any = b, out: Any = out) -> None:
                torch.matmul(a, b, out=out)

            launchers[name] = cublas
        else:
            launchers[name] = make(desc, config)
        for o in desc.outputs:
            inputs[o].fill_(math.nan)
        launchers[name](inputs)
        torch.cuda.synchronize()
        res = compare(inputs[desc.outputs[0]], expected[0], **desc.tolerance.model_dump())
        checks[name] = res.rel_err
        if not res.ok:
            raise RuntimeError(f"variant {name} is wrong on fresh inputs: {res.message}")
    medians: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, launch in launchers.items():
            medians[name].append(
                do_bench(lambda launch=launch: launch(inputs), rep=50, return_mode="median")
            )
    out: dict[str, Any] = {}
    for name, values in medians.items():
        arr = np.asarray(values)
        q25, q50, q75 = np.percentile(arr, [25, 50, 75])
        out[name] = {
            "median_ms": float(q50),
            "iqr_ms": float(q75 - q25),
            "cv": float(arr.std(ddof=1) / arr.mean()),
            "min_ms": float(arr.min()),
            "max_ms": float(arr.max()),
            "rel_err": checks[name],
            "rounds": rounds,
            "samples_ms": [float(v) for v in values],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("description")
    parser.add_argument("--evals", type=int, required=True)
    parser.add_argument("--default", required=True, help="JSON config of the baseline")
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--cublas", action="store_true")
    parser.add_argument("--budget-s", type=float, default=None, help="search time budget (s)")
    args = parser.parse_args()
    default = json.loads(args.default)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    report = search(args.description, args.evals, default, args.seed, args.budget_s)
    best = report["best"]
    print(f"search: {report['n_trials']} trials in {report['search_wall_s']:.0f} s")
    statuses: dict[str, int] = {}
    for t in report["trials"]:
        statuses[t["status"]] = statuses.get(t["status"], 0) + 1
    print("statuses:", statuses)
    import torch

    if torch.cuda.is_available() and best is not None:
        tuned = best["config"]
        # The tuned kernel parameters with the compilers' default controls: what controls add.
        params_only = {**tuned, "controls": {}}
        variants: dict[str, dict[str, Any] | None] = {
            "default": default,
            "tuned": tuned,
            "tuned_params_default_controls": params_only,
        }
        if args.cublas:
            variants["cublas"] = None
        report["remeasure"] = remeasure(args.description, variants, args.rounds)
        for name, stats in report["remeasure"].items():
            print(
                f"{name:30s} median {stats['median_ms']:.4f} ms  IQR {stats['iqr_ms']:.4f}"
                f"  CV {stats['cv']:.3f}  (rel_err {stats['rel_err']:.1e})"
            )
    print("best config:", json.dumps(best and best["config"]))
    Path(args.out + ".json").write_text(json.dumps(report, indent=1, default=str))
    ray.shutdown()


if __name__ == "__main__":
    main()
