"""A matrix's default search against its exhaustive sweep, in one run.

    python3 -m bench.matrix_exhaustive examples/kernels/triton/layer_norm_matrix.yaml --out "$OUT"
    python3 -m bench.matrix_exhaustive examples/kernels/triton/matmul_llm.yaml --out "$OUT" \
        --exhaustive-from SWEEP --exhaustive-s SECONDS
    python3 -m bench.matrix_exhaustive tests/…/row_scale.yaml --dry-run --out /tmp/mx  # CPU

1. ``search``: ``ciq-tune tune DESC`` as a user runs it (default budget, validation, controls
   file), from a cold Triton cache, timed from its start to its controls file.
2. ``exhaustive``: ``ciq-tune tune DESC --exhaustive`` likewise: every configuration of the
   listed space at every shape, the reference.
3. Per shape, both files' configurations re-measured in interleaved rounds
   (`objectives.remeasure.remeasure`, the search's protocol); per shape the ratio of medians
   exhaustive / search (1.0: the search found the optimum's speed) with its interval, and over
   the shapes the weighted geometric mean (the description's weights) with a bootstrap interval
   over rounds.

``--exhaustive-from SWEEP`` takes step 2 from a sweep run before, in parts if it was long
(`bench/sweep.sh`): its controls file, and ``--exhaustive-s`` its wall time (the parts' sum).

Peers, re-measured in the same rounds: ``--autotune CONFIGS`` adds ``@triton.autotune`` over the
configurations listed in that YAML file, keyed on every size (`bench.small_space.run_autotune`:
its choice per shape, and its wall time); the description's ``alternative`` (cuBLAS for a
GEMM), when it has one, is always added. Each peer's ratio is its time over the search's
(above 1: the search's choice is faster), per shape and as the weighted geometric mean.

Prints the table published in docs/benchmarks.md and writes OUT/matrix_exhaustive.json.
``--dry-run`` runs the plumbing on a CPU under Triton's interpreter.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.small_space import run_ciq_tune
from ciq_tune.runtime import load
from objectives import load_description


def weighted_geomean_ci(
    base: Sequence[Sequence[float]],
    cand: Sequence[Sequence[float]],
    weights: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, float]:
    """Weighted geometric mean over shapes of median(base) / median(cand), with a 95 %
    percentile bootstrap interval (each shape's rounds resampled in pairs).

    Args:
        base, cand: Per shape, the rounds of the two variants (interleaved, equal counts).
        weights: Per shape, its weight.
    """
    rng = np.random.default_rng(seed)
    total = float(sum(weights))
    log_mean = 0.0
    boots = np.zeros(n_boot)
    for b_rounds, c_rounds, w in zip(base, cand, weights, strict=True):
        b, c = np.asarray(b_rounds), np.asarray(c_rounds)
        log_mean += w / total * math.log(np.median(b) / np.median(c))
        idx = rng.integers(0, len(b), size=(n_boot, len(b)))
        boots += w / total * np.log(np.median(b[idx], axis=1) / np.median(c[idx], axis=1))
    low, high = np.percentile(np.exp(boots), [2.5, 97.5])
    return {"geomean": math.exp(log_mean), "ci_low": float(low), "ci_high": float(high)}


def remeasure_shapes(
    desc: Any,
    files: dict[str, str],
    *,
    rounds: int,
    device: str,
    peers: dict[str, list[Any]] | None = None,
) -> list[dict[str, Any]]:
    """Per shape, the files' configurations, each peer's choice there (name → one
    configuration per shape) and the description's alternative in interleaved rounds."""
    from objectives.remeasure import ALTERNATIVE
    from objectives.remeasure import remeasure

    tuned = {name: load(path, verify=False) for name, path in files.items()}
    shapes = []
    for index, shape in enumerate(desc.matrix()):
        variants: dict[str, Any] = {name: t.config_for(shape.sizes) for name, t in tuned.items()}
        variants |= {name: choices[index] for name, choices in (peers or {}).items()}
        if desc.alternative is not None:
            variants[ALTERNATIVE] = None
        result = remeasure(
            desc.at_shape(shape),
            variants,
            rounds=rounds,
            warmup_rounds=1,
            device=device,
            reference="search",
        )
        # The search's speed-up over each: t(other) / t(search); over the optimum at most ~1.
        ratios = {
            name[len("search_vs_") :]: {
                "ratio": c["speedup"],
                "ci_low": c["speedup_ci_low"],
                "ci_high": c["speedup_ci_high"],
            }
            for name, c in result["comparisons"].items()
        }
        samples = {name: v["samples_ms"] for name, v in result["variants"].items()}
        shapes.append(
            {
                "shape": shape.label(),
                "weight": shape.weight,
                "same_config": variants["search"] == variants["exhaustive"],
                "samples_ms": samples,
                **ratios["exhaustive"],
                "peers": {name: r for name, r in ratios.items() if name != "exhaustive"},
                "skipped": result["skipped"],
            }
        )
    return shapes


def peer_choices(desc: Any, configs: list[dict[str, Any]], out: Path, device: str) -> Any:
    """``@triton.autotune`` over `configs` at every shape (`bench.small_space.run_autotune`):
    its wall time and its choice per shape as a configuration of `desc`."""
    from bench.small_space import run_autotune

    run = run_autotune(desc, configs, out, device)
    choices = []
    for chosen in run["choices"]:
        params = {k: v for k, v in chosen.items() if k in desc.params}
        options = {k: v for k, v in chosen.items() if k not in desc.params}
        choices.append({"params": params, "controls": {"triton": options} if options else {}})
    return {"wall_s": run["wall_s"], "choices": choices}


def table(results: dict[str, Any]) -> str:
    """Wall times, then the search's per-shape speed relative to the exhaustive optimum."""
    search, exhaustive = results["search"]["wall_s"], results["exhaustive"]["wall_s"]
    overall = results["overall"]
    lines = [
        "| run | wall s | share of exhaustive |",
        "|---|---|---|",
        f"| search (default) | {search:.1f} | {search / exhaustive:.1%} |",
        f"| exhaustive | {exhaustive:.1f} | 100% |",
        "",
        "| shape | weight | search / optimum | 95 % CI | same config |",
        "|---|---|---|---|---|",
    ]
    for s in results["shapes"]:
        lines.append(
            f"| {s['shape']} | {s['weight']:g} | {s['ratio']:.3f} | "
            f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}] | {'yes' if s['same_config'] else 'no'} |"
        )
    lines.append(
        f"| weighted geomean | | {overall['geomean']:.3f} | "
        f"[{overall['ci_low']:.3f}, {overall['ci_high']:.3f}] | |"
    )
    peers = results.get("peers") or {}
    if peers:
        lines += [
            "",
            "| peer | its time / the search's, weighted geomean | 95 % CI |",
            "|---|---|---|",
        ]
        for name, peer in peers.items():
            low, high = peer["ci_low"], peer["ci_high"]
            lines.append(f"| {name} | {peer['geomean']:.3f} | [{low:.3f}, {high:.3f}] |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("description", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=10, help="re-measurement rounds per shape")
    parser.add_argument("--dry-run", action="store_true", help="CPU: Triton's interpreter")
    parser.add_argument(
        "--exhaustive-from", type=Path, help="the --out folder of a finished exhaustive sweep"
    )
    parser.add_argument("--exhaustive-s", type=float, help="that sweep's wall time, seconds")
    parser.add_argument(
        "--autotune", type=Path, help="a YAML list of configurations for @triton.autotune"
    )
    args = parser.parse_args(argv)
    if (args.exhaustive_from is None) != (args.exhaustive_s is None):
        parser.error("--exhaustive-from and --exhaustive-s go together")
    args.out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.dry_run else "cuda"
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"
    desc = load_description(args.description)
    results: dict[str, Any] = {"description": str(args.description), "rounds": args.rounds}
    runs: list[tuple[str, list[str]]] = [("search", [])]
    if args.exhaustive_from is None:
        runs.append(("exhaustive", ["--exhaustive"]))
    else:
        swept = args.exhaustive_from / f"{desc.name}.controls.yaml"
        if not swept.is_file():
            parser.error(f"--exhaustive-from {args.exhaustive_from}: no {swept.name} (unfinished?)")
        results["exhaustive"] = {"wall_s": args.exhaustive_s, "controls_file": str(swept)}
    for run, options in runs:
        results[run] = run_ciq_tune(
            args.description, args.out, dry_run=args.dry_run, run=run, options=options
        )
        print(f"{run}: {results[run]['wall_s']:.1f} s", flush=True)
    peers = {}
    if args.autotune is not None:
        import yaml

        configs = yaml.safe_load(args.autotune.read_text())
        results["autotune"] = peer_choices(desc, configs, args.out, device)
        print(f"autotune: {results['autotune']['wall_s']:.1f} s", flush=True)
        peers["autotune"] = results["autotune"]["choices"]
    files = {run: results[run]["controls_file"] for run in ("exhaustive", "search")}
    shapes = remeasure_shapes(desc, files, rounds=args.rounds, device=device, peers=peers)
    results["shapes"] = shapes
    weights = [s["weight"] for s in shapes]
    searched = [s["samples_ms"]["search"] for s in shapes]
    results["overall"] = weighted_geomean_ci(
        [s["samples_ms"]["exhaustive"] for s in shapes], searched, weights
    )
    names = [n for n in shapes[0]["samples_ms"] if n not in ("search", "exhaustive")]
    results["peers"] = {
        name: weighted_geomean_ci([s["samples_ms"][name] for s in shapes], searched, weights)
        for name in names
        if all(name in s["samples_ms"] for s in shapes)
    }
    (args.out / "matrix_exhaustive.json").write_text(json.dumps(results, indent=1, default=str))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
