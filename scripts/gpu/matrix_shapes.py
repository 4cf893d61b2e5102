"""Re-measure two tunings of a matmul matrix against @triton.autotune and cuBLAS.

    python3 -m ciq_tune.cli tune DESC --out OUT/search …                 # the default search
    python3 -m ciq_tune.cli tune DESC --out OUT/exhaustive --exhaustive …  # the reference
    python3 scripts/gpu/matrix_shapes.py DESC OUT/search/NAME.controls.yaml \
        OUT/exhaustive/NAME.controls.yaml --rounds 10 --json OUT/matrix.json

The first file's winners are reported as ``transfer`` and the second's as ``independent``.

Per shape, interleaved rounds of the measurement protocol (`objectives.protocol.measure_round`)
of: the transfer winner launched through `ciq_tune.runtime` (``runtime``) and directly
(``transfer``), the independent winner, ``@triton.autotune`` over the Triton tutorial's fp16
list and over ``ciq_tune.runtime.load(f).triton_configs()`` (same key M, N, K), and
``torch.matmul`` (cuBLAS). Ratios are paired per round (`ciq_tune.validation.compare_samples`);
geometric means over shapes get a bootstrap interval over rounds.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
import triton

from ciq_tune.runtime import load
from ciq_tune.validation import ValidationConfig
from ciq_tune.validation import compare_samples
from objectives import load_description
from objectives._bench import compare
from objectives._bench import make_inputs
from objectives._bench import reference_outputs
from objectives._bench import timing_sets
from objectives.protocol import measure_round
from objectives.triton import make_launch
from objectives.triton_entry import load_module

# Triton's matmul tutorial (03-matrix-multiplication.py), its fp16 configurations, with the
# tutorial's parameter names mapped to this kernel's.
TUTORIAL = Path(__file__).resolve().parents[2] / "bench" / "data" / "matmul_tutorial_configs.yaml"
KEY = ["M", "N", "K"]
LAUNCH_OPTIONS = ("num_warps", "num_stages")


def tutorial_configs() -> list[Any]:
    import yaml

    configs = []
    for listed in yaml.safe_load(TUTORIAL.read_text()):
        params = dict(listed["params"])
        options = {k: params.pop(k) for k in LAUNCH_OPTIONS}
        configs.append(triton.Config(params, **options))
    return configs


def contenders(desc: Any, sizes: dict[str, int], files: dict[str, Any]) -> dict[str, Any]:
    """name → launch(tensors) for one shape."""
    at = desc.at_shape(sizes)
    kernel = load_module(str(desc.source)).matmul_kernel
    transfer, independent = files["transfer"], files["independent"]

    def grid(meta: dict[str, Any]) -> tuple[int]:
        return (triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"]),)

    runtime_launch = transfer.launcher(kernel, grid=grid)
    auto_tutorial = triton.autotune(configs=tutorial_configs(), key=KEY)(kernel)
    auto_ciq = triton.autotune(configs=transfer.triton_configs(), key=KEY)(kernel)
    m, n, k = (sizes[s] for s in ("M", "N", "K"))

    def via(fn: Any) -> Any:
        return lambda t: fn(t["a"], t["b"], t["c"], M=m, N=n, K=k)

    return {
        "runtime": via(runtime_launch),
        "transfer": make_launch(at, transfer.config_for(sizes)),
        "independent": make_launch(at, independent.config_for(sizes)),
        "autotune_tutorial": via(lambda a, b, c, **kw: auto_tutorial[grid](a, b, c, **kw)),
        "autotune_ciq_configs": via(lambda a, b, c, **kw: auto_ciq[grid](a, b, c, **kw)),
        "cublas": lambda t: torch.matmul(t["a"], t["b"], out=t["c"]),
    }


def measure_shape(desc: Any, sizes: dict[str, int], files: dict[str, Any], rounds: int) -> dict:
    at = desc.at_shape(sizes)
    launches = contenders(desc, sizes, files)
    tensors = make_inputs(at, seed=7, device="cuda")
    expected = reference_outputs(at, tensors)[0]
    for name, launch in launches.items():
        tensors["c"].fill_(math.nan)
        launch(tensors)  # the autotuners benchmark their configs here, once per key
        torch.cuda.synchronize()
        check = compare(tensors["c"], expected, **at.tolerance.model_dump())
        if not check.ok:
            raise RuntimeError(f"{name} at {sizes} is wrong: {check.message}")
    sets = timing_sets(at, device="cuda")
    samples: dict[str, list[float]] = {name: [] for name in launches}
    names = list(launches)
    for r in range(rounds):
        # The order rotates every round: no contender always runs right after another.
        for name in names[r % len(names) :] + names[: r % len(names)]:
            stats = measure_round(_on_sets(launches[name], sets), len(sets), device="cuda")
            samples[name].append(stats.median_ms)
    return {"sizes": sizes, "samples_ms": samples}


def _on_sets(launch: Any, sets: list[Any]) -> Any:
    def run(i: int) -> None:
        launch(sets[i])

    return run


def ratio(samples: dict[str, list[float]], base: str, cand: str) -> dict[str, float]:
    result = compare_samples(
        samples[base], samples[cand], config=ValidationConfig(), measurement="interleaved"
    )
    return {
        "speedup": result.speedup,
        "ci_low": result.speedup_ci_low,
        "ci_high": result.speedup_ci_high,
    }


def geomean_ci(
    shapes: list[dict[str, Any]], base: str, cand: str, *, n_boot: int = 2000, seed: int = 0
) -> dict[str, float]:
    """Geometric mean over shapes of the ratio of medians base/cand, with a percentile
    bootstrap interval (rounds resampled in pairs within each shape)."""
    rng = np.random.default_rng(seed)
    logs = []
    boots = np.zeros(n_boot)
    for shape in shapes:
        b = np.asarray(shape["samples_ms"][base])
        c = np.asarray(shape["samples_ms"][cand])
        logs.append(math.log(np.median(b) / np.median(c)))
        idx = rng.integers(0, len(b), size=(n_boot, len(b)))
        boots += np.log(np.median(b[idx], axis=1) / np.median(c[idx], axis=1))
    boots /= len(shapes)
    low, high = np.percentile(np.exp(boots), [2.5, 97.5])
    return {"geomean": math.exp(sum(logs) / len(logs)), "ci_low": low, "ci_high": high}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("description")
    parser.add_argument("transfer_file")
    parser.add_argument("independent_file")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    desc = load_description(args.description)
    files = {"transfer": load(args.transfer_file), "independent": load(args.independent_file)}
    evaluations = {
        name: sum(e.evaluations for e in tuned.matrix.entries) for name, tuned in files.items()
    }
    shapes = []
    for shape in desc.matrix():
        result = measure_shape(desc, shape.sizes, files, args.rounds)
        s = result["samples_ms"]
        result["ratios"] = {
            "transfer_vs_independent": ratio(s, "independent", "transfer"),
            "runtime_vs_transfer": ratio(s, "transfer", "runtime"),
            "transfer_vs_autotune_tutorial": ratio(s, "autotune_tutorial", "transfer"),
            "transfer_vs_cublas": ratio(s, "cublas", "transfer"),
            "autotune_ciq_configs_vs_tutorial": ratio(
                s, "autotune_tutorial", "autotune_ciq_configs"
            ),
        }
        line = "  ".join(
            f"{k} {v['speedup']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
            for k, v in result["ratios"].items()
        )
        medians = {k: float(np.median(v)) for k, v in s.items()}
        print(shape.label(), json.dumps({k: round(v, 4) for k, v in medians.items()}), flush=True)
        print("   ", line, flush=True)
        shapes.append(result)
    overall = {
        "transfer_vs_independent": geomean_ci(shapes, "independent", "transfer"),
        "runtime_vs_transfer": geomean_ci(shapes, "transfer", "runtime"),
        "transfer_vs_autotune_tutorial": geomean_ci(shapes, "autotune_tutorial", "transfer"),
        "transfer_vs_cublas": geomean_ci(shapes, "cublas", "transfer"),
        "independent_vs_autotune_tutorial": geomean_ci(shapes, "autotune_tutorial", "independent"),
        "autotune_ciq_configs_vs_tutorial": geomean_ci(
            shapes, "autotune_tutorial", "autotune_ciq_configs"
        ),
    }
    report = {
        "gpu": torch.cuda.get_device_name(),
        "triton": triton.__version__,
        "torch": torch.__version__,
        "rounds": args.rounds,
        "evaluations": evaluations,
        "evaluation_ratio": evaluations["transfer"] / evaluations["independent"],
        "overall": overall,
        "shapes": shapes,
    }
    print("evaluations", evaluations, f"ratio {report['evaluation_ratio']:.3f}")
    for k, v in overall.items():
        print(f"geomean {k}: {v['geomean']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]")
    Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
