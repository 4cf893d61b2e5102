"""Cross-check of a controls file: the tuned configuration, the baseline and the description's
alternative re-measured with two timing methods (`ciq-tune verify`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ciq_tune.controls import controls_file as cf
from ciq_tune.errors import CiqTuneError
from objectives import make_search_space
from objectives import starting_points
from objectives.description import KernelDescription
from objectives.description import load_description
from objectives.remeasure import ALTERNATIVE
from objectives.remeasure import remeasure

RUN_SETTINGS = "run.json"
"""Written by `ciq-tune tune` next to the controls file; names the description."""


def find_description(controls_path: Path, description: Path | None) -> KernelDescription:
    """The description a controls file was tuned from: `description`, else the one named in the
    ``run.json`` of the controls file's folder.

    Raises:
        CiqTuneError: none given and none recorded, or the kernel source changed since tuning.
    """
    record = cf.load(controls_path)
    if description is None:
        settings = controls_path.parent / RUN_SETTINGS
        if not settings.is_file():
            raise CiqTuneError(
                f"{controls_path}: no {RUN_SETTINGS} next to it names the kernel description; "
                "pass --description DESCRIPTION.yaml"
            )
        description = Path(json.loads(settings.read_text())["description"])
    desc = load_description(description)
    if desc.source_sha256() != record.kernel.source_sha256:
        raise CiqTuneError(
            f"{controls_path}: `kernel.source_sha256` does not match {desc.source} (the kernel "
            "changed since tuning; re-tune it)"
        )
    return desc


def verify(
    controls_path: Path,
    *,
    description: Path | None = None,
    rounds: int = 30,
    warmup_rounds: int = 3,
    device: str = "cuda",
) -> dict[str, Any]:
    """Re-measure a controls file's configuration against the baseline and the alternative.

    Two methods, each over interleaved rounds: the measurement protocol of the search
    (`objectives.protocol`: do_bench events around each launch after an L2 flush) and CUDA-graph
    replays (`objectives.graph_timing`), which share none of its host path. Off a GPU only the
    first runs (host clock).

    Returns:
        ``protocol`` and ``cuda_graph`` (each `objectives.remeasure.remeasure`'s record, the
        latter None off a GPU), ``agreement`` (variant → graph median / protocol median),
        ``speedup_agreement`` (comparison → graph speedup / protocol speedup),
        ``recorded`` (the controls file's re-measured scores, if any) and ``kernel``.
    """
    record = cf.load(controls_path)
    desc = find_description(controls_path, description)
    tuned = {"params": dict(record.params), "controls": dict(record.controls)}
    recorded = record.scores.remeasured
    result = verify_config(desc, tuned, rounds=rounds, warmup_rounds=warmup_rounds, device=device)
    result["recorded"] = None if recorded is None else recorded.model_dump(mode="json")
    return result


def verify_config(
    desc: KernelDescription,
    tuned: Any,
    *,
    rounds: int = 30,
    warmup_rounds: int = 3,
    device: str = "cuda",
) -> dict[str, Any]:
    """`verify` for a configuration given directly (the GPU benchmark scripts)."""
    baseline = starting_points(desc, make_search_space(desc))[0]
    variants: dict[str, Any] = {"tuned": tuned, "baseline": baseline}
    if desc.alternative is not None:
        variants[ALTERNATIVE] = None
    common: dict[str, Any] = {"rounds": rounds, "warmup_rounds": warmup_rounds, "device": device}
    by_protocol = remeasure(desc, variants, **common)
    by_graph = None
    agreement: dict[str, float] = {}
    speedups: dict[str, float] = {}
    if device == "cuda":
        from objectives.graph_timing import time_cuda_graph

        by_graph = remeasure(desc, variants, round_timer=time_cuda_graph, **common)
        for name, stats in by_protocol["variants"].items():
            other = by_graph["variants"].get(name)
            if other is not None:
                agreement[name] = other["median_ms"] / stats["median_ms"]
        # Each method has its own constant per-launch overhead (events around every launch vs
        # none inside a graph); the speedups, ratios on one method, must agree.
        for key, c in by_protocol["comparisons"].items():
            other_c = by_graph["comparisons"].get(key)
            if other_c is not None:
                speedups[key] = other_c["speedup"] / c["speedup"]
    return {
        "kernel": desc.name,
        "alternative": None if desc.alternative is None else desc.alternative.name,
        "protocol": by_protocol,
        "cuda_graph": by_graph,
        "agreement": agreement,
        "speedup_agreement": speedups,
        "recorded": None,
    }


def format_verification(result: dict[str, Any]) -> str:
    """A table: each variant's median [CI] by both methods, and the tuned speedups."""
    by_graph = result["cuda_graph"]
    lines = [
        f"{result['kernel']}: medians in ms [95 % CI] over interleaved rounds",
        "| variant | protocol (do_bench events) | CUDA graph + events | graph / protocol |",
        "| --- | --- | --- | --- |",
    ]
    for name, stats in result["protocol"]["variants"].items():
        label = result["alternative"] if name == ALTERNATIVE else name
        cells = [
            str(label),
            f"{stats['median_ms']:.4f} [{stats['median_ci_low_ms']:.4f}, "
            f"{stats['median_ci_high_ms']:.4f}]",
        ]
        other = None if by_graph is None else by_graph["variants"].get(name)
        if other is None:
            cells += ["—", "—"]
        else:
            cells += [
                f"{other['median_ms']:.4f} [{other['median_ci_low_ms']:.4f}, "
                f"{other['median_ci_high_ms']:.4f}]",
                f"{result['agreement'][name]:.3f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    for method, record in (("protocol", result["protocol"]), ("CUDA graph", by_graph)):
        if record is None:
            continue
        for key, c in record["comparisons"].items():
            lines.append(
                f"{method}: {key.replace('_vs_', ' over ')} speedup {c['speedup']:.3f} "
                f"[{c['speedup_ci_low']:.3f}, {c['speedup_ci_high']:.3f}], {c['verdict']}"
            )
        for name, why in record["skipped"].items():
            lines.append(f"{method}: {name} not measured: {why}")
    for key, ratio in result.get("speedup_agreement", {}).items():
        lines.append(f"{key.replace('_vs_', ' over ')}: CUDA graph speedup / protocol {ratio:.3f}")
    recorded = result.get("recorded")
    if recorded is not None:
        tuned = result["protocol"]["variants"]["tuned"]["median_ms"]
        lines.append(
            f"recorded at tuning: best {recorded['best_median']:.4f} ms "
            f"[{recorded['best_ci'][0]:.4f}, {recorded['best_ci'][1]:.4f}]; now "
            f"{tuned:.4f} ms ({100 * (tuned / recorded['best_median'] - 1):+.1f} %)"
        )
    return "\n".join(lines)
