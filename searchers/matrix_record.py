"""The controls file of a finished matrix search: its `matrix` section, an entry per bucket
with the winner, the shapes' values and the re-measurement, and the heaviest bucket's
configuration at the top level."""

from __future__ import annotations

import math
from typing import Any

from ciq_tune.controls import controls_file as cf
from ciq_tune.controls.matrix import Matrix
from ciq_tune.controls.matrix import MatrixEntry
from ciq_tune.controls.matrix import ShapeResult
from objectives.description import KernelDescription
from objectives.matrix import selection_rule
from searchers.matrix_search import BucketOutcome


def matrix_record(desc: KernelDescription, outcomes: list[BucketOutcome]) -> Matrix:
    """The controls file's `matrix` section of a finished matrix search (entries in the
    description's shape order; `rendered` is filled in by `controls_file.build`)."""
    entries = []
    positions = {s.label(): i for i, s in enumerate(desc.matrix())}
    for outcome in sorted(outcomes, key=lambda o: positions[o.group.shapes[0].label()]):
        validation = outcome.validation.to_dict()
        shapes = [
            ShapeResult(
                sizes=shape.sizes,
                weight=shape.weight,
                baseline=base,
                best=best,
                remeasured=_remeasured(validation) if len(outcome.group.shapes) == 1 else None,
            )
            for shape, base, best in zip(
                outcome.group.shapes,
                outcome.baseline_values,
                outcome.winner_values,
                strict=True,
            )
        ]
        entries.append(
            MatrixEntry(
                key=outcome.group.key,
                params=outcome.winner.get("params", {}),
                controls=outcome.winner.get("controls", {}),
                helion_config=outcome.helion_config,
                shapes=shapes,
                evaluations=outcome.evaluations,
                validation=validation,
            )
        )
    return Matrix(selection=selection_rule(desc), metric=desc.metric, entries=entries)


def _remeasured(validation: dict[str, Any]) -> dict[str, Any] | None:
    """The re-measured comparison of the shipped configuration with the baseline, if any."""
    winner = validation.get("winner")
    if not isinstance(winner, dict):
        return None
    keep = ("verdict", "speedup", "speedup_ci_low", "speedup_ci_high", "p_value")
    out = {k: winner[k] for k in keep if k in winner}
    for side in ("baseline", "candidate"):
        if isinstance(winner.get(side), dict):
            out[f"{side}_median"] = winner[side].get("median")
    return out


def controls_record(
    desc: KernelDescription, outcomes: list[BucketOutcome], *, source: str
) -> cf.ControlsFile:
    """The controls file of a matrix search. Its top-level `params`/`controls` are those of the
    heaviest bucket (what `ciq-tune apply` prints without a shape); `matrix` holds them all."""
    from ciq_tune.controls.controls_file import installed_catalog

    matrix = matrix_record(desc, outcomes)
    main = max(outcomes, key=lambda o: o.group.weight)
    names = {n for o in outcomes for n in o.winner.get("controls", {})}
    # A Triton kernel's file records the Triton it was tuned under, controls or not.
    names |= {"triton"} if desc.kind == "triton" else set()
    catalogs = {
        n: installed_catalog(n, desc.arch, desc.vendor_controls_files(n)) for n in sorted(names)
    }
    first = desc.at_shape(main.group.shapes[0])
    base, best = main.baseline_values[0], main.winner_values[0]
    sign = 1 if desc.mode == "min" else -1
    improvement = None
    if base and best is not None:
        improvement = round(100.0 * sign * (base - best) / abs(base), 3)
    return cf.build(
        kernel=cf.KernelInfo(
            name=desc.name,
            kind=desc.kind,
            source=source,
            source_sha256=desc.source_sha256(),
            entry=desc.entry,
            arch=desc.arch,
        ),
        catalogs=catalogs,
        controls=main.winner.get("controls", {}),
        params=main.winner.get("params", {}),
        benchmark=first.benchmark_record(),
        scores=cf.Scores(
            baseline=base, best=best if best is not None else math.nan, improvement_pct=improvement
        ),
        gpu=cf.detect_gpu() if desc.kind != "ptx" else None,
        validation=main.validation.to_dict(),
        matrix=matrix,
    )
