"""Trust in the numbers, per kernel: does the search's value predict the re-measured one, what do
staged controls add, and does a second timing method agree (docs/benchmarks.md)?

    python -m bench.trust --kernels matmul,attention --budget 40 --out "$OUT"

For each kernel, on one GPU, through the library only:

1. a parameters-only search and a staged search (parameters, then controls on the top 3), each
   `--budget` evaluations, noise-aware (`searchers.noise_aware`);
2. one interleaved re-measurement (`objectives.remeasure`) of the default configuration (twice:
   the second copy records the noise of identical configurations), the parameters-only best,
   stage 1's best, the staged best and the description's alternative, compared with the staged
   best;
3. `objectives.verify.verify_config` on the staged best: the same protocol and CUDA-graph timing.

Writes OUT/<kernel>.json (everything, per-round samples included) and prints a summary line per
kernel; OUT/noise.json collects the identical-configuration pairs for `bench.validation_power`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# Description and the controls stage 2 polishes, per kernel.
_TRITON_CONTROLS = {"triton": {"include": ["maxnreg", "ptx_options"]}}
KERNELS: dict[str, tuple[str, dict[str, Any]]] = {
    "matmul": ("examples/kernels/triton/matmul_persistent.yaml", _TRITON_CONTROLS),
    "attention": ("examples/kernels/triton/attention.yaml", _TRITON_CONTROLS),
    "softmax": ("examples/kernels/triton/softmax.yaml", _TRITON_CONTROLS),
    "layer_norm": ("examples/kernels/triton/layer_norm.yaml", _TRITON_CONTROLS),
    "row_sum": (
        "examples/kernels/cuda/row_sum.yaml",
        {"nvcc": {"include": ["extra_device_vectorization", "restrict", "maxrregcount", "ptxas"]}},
    ),
}


# Sizes of a --dry-run on a CPU (Triton's interpreter is slow).
DRY_SIZES: dict[str, dict[str, int]] = {
    "softmax": {"M": 37, "N": 100, "BLOCK_N": 128, "NUM_SMS": 3},
    "layer_norm": {"M": 9, "N": 1500},
}


def on_this_gpu(path: Path, dry_sizes: dict[str, int] | None = None) -> Any:
    """The description with ``NUM_SMS`` set to this GPU's SM count (when it has that size), or
    at `dry_sizes` for a CPU dry run."""
    import torch

    from objectives import load_description

    desc = load_description(path)
    if dry_sizes is not None:
        return desc.model_copy(update={"sizes": dry_sizes})
    if "NUM_SMS" not in desc.sizes:
        return desc
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return desc.model_copy(update={"sizes": {**desc.sizes, "NUM_SMS": sms}})


def run_kernel(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Searches, re-measurement and verification of one kernel (see the module docstring)."""
    from ray import tune

    from bench.description_search import search_description
    from objectives.description import ControlSelection
    from objectives.remeasure import ALTERNATIVE
    from objectives.remeasure import remeasure
    from objectives.verify import verify_config
    from searchers.kernel_search import NoiseSettings
    from searchers.staged import staged_search

    path, controls = KERNELS[name]
    loaded = on_this_gpu(REPO / path, DRY_SIZES[name] if args.dry_run else None)
    # The description with the controls stage 2 searches: every variant is re-measured with it.
    selection = {k: ControlSelection.model_validate(v) for k, v in controls.items()}
    desc = loaded.model_copy(update={"controls": selection})
    device = "cpu" if args.dry_run else "cuda"
    noise = NoiseSettings()

    def run_config(stage: str) -> tune.RunConfig:
        return tune.RunConfig(
            name=f"{name}-{stage}-{int(time.time())}", storage_path=str(args.work), verbose=0
        )

    params_desc = desc.model_copy(update={"controls": {}})
    t0 = time.perf_counter()
    params_only, default = search_description(
        params_desc,
        budget=args.budget,
        seed=args.seed,
        run_config=run_config("params_only"),
        trials_per_gpu=args.trials_per_gpu,
        noise=noise,
    )
    staged = staged_search(
        desc,
        budget=args.budget,
        seed=args.seed,
        run_config=run_config,
        trials_per_gpu=args.trials_per_gpu,
        noise=noise,
    )
    search_s = time.perf_counter() - t0
    if params_only.best is None or staged.best is None or staged.best_params is None:
        raise RuntimeError(f"{name}: a search found no working configuration")
    variants: dict[str, Any] = {
        "default": default,
        "default_again": default,
        "params_only": params_only.best["config"],
        "staged_params": staged.best_params,
        "staged": staged.best,
    }
    if desc.alternative is not None:
        variants[ALTERNATIVE] = None
    remeasured = remeasure(
        desc,
        variants,
        rounds=args.rounds,
        warmup_rounds=3,
        device=device,
        reference="staged",
    )
    verified = verify_config(desc, staged.best, rounds=args.verify_rounds, device=device)
    staged_trials = staged.params.trials + (staged.controls.trials if staged.controls else [])
    search_value = {
        "params_only": params_only.best[desc.metric],
        "staged": next(t[desc.metric] for t in staged_trials if t["config"] == staged.best),
    }
    return {
        "kernel": name,
        "description": path,
        "sizes": desc.sizes,
        "budget": args.budget,
        "search_s": search_s,
        "search_value": search_value,
        "params_only": {"trials": params_only.trials, "wall_s": params_only.wall_s},
        "staged": {
            "params_trials": staged.params.trials,
            "controls_trials": None if staged.controls is None else staged.controls.trials,
            "best_params": staged.best_params,
            "best": staged.best,
        },
        "remeasure": remeasured,
        "verify": verified,
        "summary": summarize(search_value, remeasured, verified),
    }


def record_noise(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The default configuration re-measured against a second copy of itself, interleaved."""
    from objectives import make_search_space
    from objectives import starting_points
    from objectives.remeasure import remeasure

    desc = on_this_gpu(REPO / KERNELS[name][0], DRY_SIZES[name] if args.dry_run else None)
    default = starting_points(desc, make_search_space(desc))[0]
    record = remeasure(
        desc,
        {"default": default, "default_again": default},
        rounds=args.rounds,
        warmup_rounds=3,
        device="cpu" if args.dry_run else "cuda",
        reference="default",
    )
    return {"kernel": name, "sizes": desc.sizes, "remeasure": record}


def summarize(
    search_value: dict[str, float], remeasured: dict[str, Any], verified: dict[str, Any]
) -> dict[str, Any]:
    """The numbers docs/benchmarks.md quotes for one kernel."""
    v = remeasured["variants"]
    c = remeasured["comparisons"]

    def ratio(key: str) -> dict[str, Any] | None:
        r = c.get(key)
        if r is None:
            return None
        return {
            "speedup": r["speedup"],
            "ci": [r["speedup_ci_low"], r["speedup_ci_high"]],
            "verdict": r["verdict"],
            "p_value": r["p_value"],
        }

    identical = c.get("staged_vs_default")
    return {
        "gap": {
            name: v[name]["median_ms"] / value - 1
            for name, value in search_value.items()
            if name in v
        },
        "medians_ms": {
            name: [s["median_ms"], s["median_ci_low_ms"], s["median_ci_high_ms"]]
            for name, s in v.items()
        },
        "staged_over_params_only": ratio("staged_vs_params_only"),
        "controls_contribution": ratio("staged_vs_staged_params"),
        "staged_over_default": ratio("staged_vs_default"),
        "staged_over_alternative": ratio("staged_vs_alternative"),
        "default_vs_itself": _identical(v),
        "verify_vs_remeasure": verified["protocol"]["variants"]["tuned"]["median_ms"]
        / v["staged"]["median_ms"]
        - 1,
        "graph_vs_protocol": verified["agreement"],
        "graph_vs_protocol_speedups": verified["speedup_agreement"],
        "skipped": remeasured["skipped"],
        "has_default_comparison": identical is not None,
    }


def _identical(variants: dict[str, Any]) -> dict[str, Any] | None:
    from ciq_tune.validation import compare_samples

    a, b = variants.get("default"), variants.get("default_again")
    if a is None or b is None:
        return None
    r = compare_samples(a["samples_ms"], b["samples_ms"], measurement="interleaved")
    return {"speedup": r.speedup, "ci": [r.speedup_ci_low, r.speedup_ci_high], "kept": r.kept}


def line(record: dict[str, Any]) -> str:
    """One summary line per kernel."""
    s = record["summary"]

    def fmt(r: dict[str, Any] | None) -> str:
        return "n/a" if r is None else f"{r['speedup']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"

    gaps = ", ".join(f"{k} {100 * g:+.1f} %" for k, g in s["gap"].items())
    agree = ", ".join(f"{k} {x:.3f}" for k, x in s["graph_vs_protocol"].items())
    agree += "; speedups " + ", ".join(
        f"{k} {x:.3f}" for k, x in s["graph_vs_protocol_speedups"].items()
    )
    return (
        f"{record['kernel']}: gap (re-measured / in-search - 1) {gaps}; staged/params-only "
        f"{fmt(s['staged_over_params_only'])}; controls {fmt(s['controls_contribution'])}; "
        f"vs alternative {fmt(s['staged_over_alternative'])}; verify vs re-measure "
        f"{100 * s['verify_vs_remeasure']:+.2f} %; graph/protocol {agree}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated")
    parser.add_argument("--budget", type=int, default=40, help="evaluations per search")
    parser.add_argument("--rounds", type=int, default=40, help="re-measurement rounds")
    parser.add_argument("--verify-rounds", type=int, default=20)
    parser.add_argument("--trials-per-gpu", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ciq-trust"))
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help=f"on a CPU: Triton's interpreter at tiny sizes ({', '.join(DRY_SIZES)} only)",
    )
    parser.add_argument("--num-cpus", type=int, help="CPUs of the local Ray (default: all)")
    parser.add_argument(
        "--noise-only",
        action="store_true",
        help="only record the default configuration against itself for --rounds rounds "
        "(OUT/<kernel>_noise.json, for bench.validation_power --recorded); no search",
    )
    args = parser.parse_args(argv)
    if args.dry_run:
        import os

        # Before anything imports Triton: the driver's own launches run in the interpreter.
        os.environ["TRITON_INTERPRET"] = "1"
    names = [k for k in args.kernels.split(",") if k]
    unknown = sorted(set(names) - set(KERNELS))
    if unknown:
        parser.error(f"--kernels names unknown kernels {unknown}; known: {sorted(KERNELS)}")
    import ray

    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    status = 0
    try:
        for name in names:
            start = time.perf_counter()
            try:
                if args.noise_only:
                    noise = record_noise(name, args)
                    (args.out / f"{name}_noise.json").write_text(json.dumps(noise, indent=1))
                    print(f"{name}: {args.rounds} identical pairs recorded", flush=True)
                    continue
                record = run_kernel(name, args)
            except Exception as exc:  # one kernel's failure must not cost the others
                import traceback

                print(f"{name}: FAILED {type(exc).__name__}: {exc}", flush=True)
                (args.out / f"{name}.error.txt").write_text(traceback.format_exc())
                status = 1
                continue
            record["wall_s"] = time.perf_counter() - start
            (args.out / f"{name}.json").write_text(json.dumps(record, indent=1, default=_jsonable))
            print(line(record), f"({record['wall_s']:.0f} s)", flush=True)
    finally:
        ray.shutdown()
    return status


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "item"):
        return value.item()
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
