"""Kernels as their projects ship them, captured from a model's run, tuned and applied, with no
edit to the kernels (GPU).

    python3 -m bench.shipped_kernels --out "$OUT"

The model is `examples/shipped/mlp.py` (an MLP block: RMS norm, two matmuls, SwiGLU, a matmul)
over the three kernels of `examples/shipped/kernels.py`, written in the conventions of public
projects: strides between the pointers, a kernel under its own ``@triton.autotune`` with a grid
of its tiles, a ``tl.constexpr`` column count. Steps, each timed from its start:

1. ``capture``: the model's forward at each token count under ``ciq_tune.capture``, which
   writes one description per kernel (OUT/captured/<kernel>.yaml, shapes weighted by launches).
2. ``tune``: ``ciq-tune tune OUT/captured/<kernel>.yaml --budget B --validate-top 3`` per
   kernel, as a user runs it (`bench.small_space.run_ciq_tune`: a subprocess, a cold cache).
3. ``apply``: each kernel swapped for ``ciq_tune.runtime.tuned(<its controls file>)(kernel)``;
   every launch of the model then takes its shape's tuned configuration.
4. ``re-measure``: per kernel and captured shape, the model's own launch helper with the shipped
   kernel (the project's settings; the autotuned matmul at its own choice) against the tuned
   one, paired and interleaved (`ciq_tune.validation.validate`, fixed rounds, one test), each
   round a CUDA-graph replay (`triton.testing.do_bench_cudagraph`); then the whole forward.
5. ``overhead``: host time per launch of the model's norm helper at the smallest shape, plain
   against ``@tuned``, timed in alternation (21 × 1,000 launches each): the medians and the
   median paired difference.

Prints the tables published in docs/benchmarks.md and writes OUT/shipped_kernels.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

KERNELS = ("rms_norm_forward", "matmul_kernel", "swiglu_forward")


def capture_model(model: Any, tokens: list[int], hidden: int, out: Path) -> dict[str, Any]:
    """Run the model at each token count under `ciq_tune.capture`; the descriptions written."""
    import torch
    import yaml

    import ciq_tune

    batches = [torch.randn(t, hidden, device="cuda").to(torch.bfloat16) for t in tokens]
    t0 = time.perf_counter()
    with ciq_tune.capture(*KERNELS, out=out):
        for x in batches:
            model(x)
    torch.cuda.synchronize()
    wall_s = time.perf_counter() - t0
    shapes = {}
    for name in KERNELS:
        data = yaml.safe_load((out / f"{name}.yaml").read_text())
        shapes[name] = data.get("shapes") or [data["sizes"]]
    return {"wall_s": wall_s, "shapes": shapes}


def paired_speedup(shipped: Callable[[], Any], tuned: Callable[[], Any], rounds: int) -> Any:
    """The tuned launch against the shipped one: `rounds` interleaved CUDA-graph rounds each,
    one paired test (speedup = shipped / tuned, with its bootstrap interval)."""
    from triton.testing import do_bench_cudagraph

    from ciq_tune.validation import ValidationConfig
    from ciq_tune.validation import validate

    def timer(fn: Callable[[], Any]) -> Callable[[], float]:
        return lambda: float(do_bench_cudagraph(fn, rep=20))

    settings = ValidationConfig(repetitions=rounds, looks=1, warmup=2)
    result = validate(timer(shipped), timer(tuned), config=settings)
    return {
        "shipped_ms": result.baseline.median,
        "tuned_ms": result.candidate.median,
        "speedup": result.speedup,
        "ci": [result.speedup_ci_low, result.speedup_ci_high],
        "verdict": result.verdict,
    }


def host_us_per_launch(
    plain: Callable[[], Any], tuned: Callable[[], Any], launches: int = 1000, repetitions: int = 21
) -> dict[str, float]:
    """Host microseconds per call of `plain` and of `tuned`, timed in alternation
    (`repetitions` × `launches` each, the GPU drained between repetitions): the medians, and
    the median of the paired differences (what the tuned launch adds)."""
    import torch

    def per_launch(launch: Callable[[], Any]) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(launches):
            launch()
        elapsed = (time.perf_counter() - t0) / launches * 1e6
        torch.cuda.synchronize()
        return elapsed

    pairs = [(per_launch(plain), per_launch(tuned)) for _ in range(repetitions)]
    return {
        "plain": statistics.median(p for p, _ in pairs),
        "tuned": statistics.median(t for _, t in pairs),
        "added": statistics.median(t - p for p, t in pairs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tokens", type=int, nargs="+", default=[128, 2048])
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=11008)
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    import torch

    from bench.small_space import run_ciq_tune
    from ciq_tune.runtime import tuned
    from examples.shipped import kernels
    from examples.shipped import mlp

    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = mlp.MLPBlock(args.hidden, args.intermediate, "cuda")
    report: dict[str, Any] = {"tokens": args.tokens, "budget": args.budget}
    report["capture"] = capture_model(model, args.tokens, args.hidden, args.out / "captured")
    print(f"capture: {report['capture']['wall_s']:.1f} s", flush=True)
    for name, shapes in report["capture"]["shapes"].items():
        print(f"  {name}: {shapes}", flush=True)

    shipped = {name: getattr(kernels, name) for name in KERNELS}
    applied = {}
    report["tune"] = {}
    for name in KERNELS:
        options = ["--budget", str(args.budget)]
        run = run_ciq_tune(
            args.out / "captured" / f"{name}.yaml",
            args.out,
            dry_run=False,
            run=name,
            options=options,
        )
        report["tune"][name] = run
        applied[name] = tuned(run["controls_file"])(shipped[name])
        print(f"tune {name}: {run['wall_s']:.1f} s, choices {run['choices']}", flush=True)

    def launches(tokens: int) -> dict[str, Callable[[], Any]]:
        x = torch.randn(tokens, args.hidden, device="cuda").to(torch.bfloat16)
        g = torch.randn(tokens, args.intermediate, device="cuda").to(torch.bfloat16)
        return {
            "rms_norm_forward": lambda: mlp.rms_norm(x, model.norm),
            "matmul_kernel": lambda: mlp.matmul(g, model.down),
            "swiglu_forward": lambda: mlp.swiglu(g, g),
            "model": lambda: model(x),
        }

    def use(chosen: dict[str, Any]) -> None:
        for name, kernel in chosen.items():
            setattr(kernels, name, kernel)

    report["remeasured"] = []
    for tokens in args.tokens:
        calls = launches(tokens)
        for name, call in calls.items():
            swapped = KERNELS if name == "model" else (name,)

            def as_shipped(call: Callable[[], Any] = call) -> Any:
                use(shipped)
                return call()

            def as_tuned(call: Callable[[], Any] = call, swapped: Any = swapped) -> Any:
                use({k: applied[k] for k in swapped})
                return call()

            row = {
                "kernel": name,
                "tokens": tokens,
                **paired_speedup(as_shipped, as_tuned, args.rounds),
            }
            report["remeasured"].append(row)
            print(json.dumps(row), flush=True)
    use(shipped)

    norm = launches(min(args.tokens))["rms_norm_forward"]

    def plain() -> Any:
        kernels.rms_norm_forward = shipped["rms_norm_forward"]
        return norm()

    def tuned_norm() -> Any:
        kernels.rms_norm_forward = applied["rms_norm_forward"]
        return norm()

    report["overhead_us"] = host_us_per_launch(plain, tuned_norm)
    use(shipped)
    (args.out / "shipped_kernels.json").write_text(json.dumps(report, indent=1, default=str))
    print(table(report))
    return 0


def table(report: dict[str, Any]) -> str:
    lines = [
        "| step | kernel | wall s |",
        "|---|---|---|",
        f"| capture | all three | {report['capture']['wall_s']:.1f} |",
    ]
    for name, run in report["tune"].items():
        lines.append(f"| tune --budget {report['budget']} | {name} | {run['wall_s']:.1f} |")
    lines += [
        "",
        "| kernel | tokens | shipped ms | tuned ms | speedup [95 % CI] | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["remeasured"]:
        low, high = row["ci"]
        lines.append(
            f"| {row['kernel']} | {row['tokens']} | {row['shipped_ms']:.4f} | "
            f"{row['tuned_ms']:.4f} | {row['speedup']:.3f} [{low:.3f}, {high:.3f}] | "
            f"{row['verdict']} |"
        )
    over = report["overhead_us"]
    lines += [
        "",
        f"host µs per launch: plain {over['plain']:.2f}, @tuned {over['tuned']:.2f} "
        f"(paired median {over['added']:+.2f})",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
