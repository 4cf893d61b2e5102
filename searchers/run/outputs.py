"""The outputs folder of a `tune` run: the controls file, the evaluations and validation
tables, and the lines that summarise them (`write_outputs`)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.errors import CiqTuneError
from ciq_tune.results import finite_number

if TYPE_CHECKING:
    from ciq_tune.validation import SearchValidation


def write_outputs(
    out: Path,
    desc: Any,
    results: Any,
    grid: Any,
    points: Sequence[Any],
    validation: SearchValidation,
) -> int:
    """The outputs of `tune` (and `resume`): evaluations table, controls file of the validated
    winner (the search's best when validation was skipped), validation.json, summary."""
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.controls.controls_file import installed_catalog
    from objectives import measurement_is_exact

    # Every evaluation, failures included, for `ciq-tune report` and for review.
    results.to_parquet(out / "evaluations.parquet")
    results.to_csv(out / "evaluations.csv")
    ok = [
        r
        for r in results.records
        if r.ok and finite_number((r.values or {}).get(desc.metric)) is not None
    ]
    if not ok:
        raise CiqTuneError(
            f"no candidate of {len(results.records)} compiled and ran: "
            f"{failure_summary(results.records)}; details in {out}/evaluations.csv"
        )
    sign = 1 if desc.mode == "min" else -1
    # One ranking everywhere: ties go to the fewest non-default controls (SearchResults.best).
    search_best = results.best(1)[0]
    best_config, best = search_best.config, search_best.values[desc.metric]
    search_value = best
    baseline = next((r.values[desc.metric] for r in ok if r.config == points[0]), None)
    if validation.winner is not None:
        best_config, best = validation.winner.config, validation.winner.search_values[desc.metric]
    elif validation.outcome == "baseline" and baseline is not None:
        best_config, best = points[0], baseline
    dropped: dict[str, dict[str, Any]] = {}
    reset: dict[str, Any] = {}  # parameters set back to the baseline's value
    if validation.simplification is not None:
        # A timed winner without the controls and parameter values its re-measurement showed
        # do nothing.
        from ciq_tune.controls.simplify import PARAMS

        best_config = validation.simplification["config"]
        dropped = dict(validation.simplification["dropped"])
        reset = dropped.pop(PARAMS, {})
    # An exact metric (validation skipped) is re-checked by recompiling without each control.
    if measurement_is_exact(desc) and validation.winner is None and best_config.get("controls"):
        from ciq_tune.controls.simplify import simplify_controls
        from objectives import make_measure

        best_config, dropped = simplify_controls(
            best_config, best, make_measure(desc), mode=desc.mode
        )
    baseline_claim = baseline if timings_are_claims(desc, validation) else None
    improvement = None
    if baseline_claim:
        improvement = round(100.0 * sign * (baseline_claim - best) / abs(baseline_claim), 3)
    # A Triton kernel's file records the Triton it was tuned under, controls or not.
    names = set(best_config.get("controls", {})) | ({"triton"} if desc.kind == "triton" else set())
    catalogs = {
        n: installed_catalog(n, desc.arch, desc.vendor_controls_files(n)) for n in sorted(names)
    }
    record = cf.build(
        kernel=cf.KernelInfo(
            name=desc.name,
            kind=desc.kind,
            source=relative_path(desc.source, out),
            source_sha256=desc.source_sha256(),
            entry=desc.entry,
            arch=desc.arch,
        ),
        catalogs=catalogs,
        controls=best_config.get("controls", {}),
        params=best_config.get("params", {}),
        benchmark=desc.benchmark_record(),
        scores=cf.Scores(
            baseline=baseline,
            best=best,
            improvement_pct=improvement,
            remeasured=_remeasured(validation),
        ),
        gpu=cf.detect_gpu() if desc.kind != "ptx" else None,
        validation=validation.to_dict(),
        dropped_controls=dropped,
    )
    path = cf.write(out / f"{desc.name}.controls.yaml", record)
    (out / VALIDATION_FILE).write_text(json.dumps(validation.to_dict(), indent=2) + "\n")
    again = record.scores.remeasured
    remeasured = (
        ""
        if again is None
        else f"re-measured ({again.rounds} interleaved rounds, {100 * again.confidence:.4g} % CI): "
        f"baseline {again.baseline_median:.4g} [{again.baseline_ci[0]:.4g}, "
        f"{again.baseline_ci[1]:.4g}], best {again.best_median:.4g} [{again.best_ci[0]:.4g}, "
        f"{again.best_ci[1]:.4g}], speedup {again.speedup:.4f} [{again.speedup_ci[0]:.4f}, "
        f"{again.speedup_ci[1]:.4f}]\n"
    )
    simplified = ""
    if dropped or reset:
        names_dropped = sorted(f"{c}.{n}" for c, d in dropped.items() for n in d)
        what = " and ".join(
            ([f"dropped {len(names_dropped)} control(s)"] if dropped else [])
            + ([f"reset {len(reset)} parameter(s) to the baseline's value"] if reset else [])
        )
        how = (
            "a paired re-measurement showed not faster beyond noise"
            if validation.simplification is not None
            else "a fresh compile showed change nothing"
        )
        simplified = f"simplified: {what} that {how} ({', '.join(names_dropped + sorted(reset))})\n"
    check = (validation.simplification or {}).get("check")
    if check is not None and "speedup" in check:
        low, high = check["speedup_ci"]
        verdict = "not shipped" if check["verdict"] == "KEPT" else "shipped"
        simplified += (
            f"simplification {verdict}: the winner re-measured {check['speedup']:.4f} "
            f"[{low:.4f}, {high:.4f}] × its simplified configuration\n"
        )
    failures = failure_summary(results.records)
    timed = "" if measurement_is_exact(desc) else f", L2 {desc.l2}"
    print(
        f"{len(results.records)} evaluations ({len(ok)} ok"
        + (f"; {failures}" if failures else "")
        + f"); {desc.metric} in the search (one round each{timed}): "
        f"baseline {_short(baseline)}, best {_short(search_value)}\n{validation.summary()}\n"
        f"{remeasured}{simplified}wrote {path} ({desc.metric} {_short(best)} with "
        f"{json.dumps(best_config)})"
    )
    return 0


def _short(value: Any) -> str:
    """A metric as printed: five significant digits (the file keeps every digit)."""
    return f"{value:.5g}" if isinstance(value, float) else str(value)


def failure_summary(records: Sequence[Any]) -> str:
    """`3 of 40 failed: timeout 2 (first: …); compile_error 1 (first: …)`, or ""."""
    from ciq_tune.progress import Progress

    counts = Progress("-", "min", quiet=True)
    for record in records:
        counts.update(record.status, None, record.info.get("error"))
    return counts.failure_summary()


NO_GPU_REASON = (
    "no GPU: Triton and Helion run under their CPU interpreter here, so the search checked "
    "correctness only; its host-clock timings are not a speedup claim"
)
"""Why `tune` skips validation and claims no improvement for a timed kind without a GPU."""


def timings_are_claims(desc: Any, validation: SearchValidation) -> bool:
    """Whether the search's values may be reported as an improvement: not for the CPU
    interpreter's timings of a Triton/Helion kernel."""
    return not (validation.outcome == "skipped" and validation.reason == NO_GPU_REASON)


def _remeasured(validation: SearchValidation) -> Any:
    """The winner's re-measured medians and speedup with their CIs, for the controls file."""
    from ciq_tune.controls import controls_file as cf

    result = None if validation.winner is None else validation.winner.result
    if result is None:
        return None
    return cf.Remeasured(
        baseline_median=result.baseline.median,
        baseline_ci=(result.baseline.median_ci_low, result.baseline.median_ci_high),
        best_median=result.candidate.median,
        best_ci=(result.candidate.median_ci_low, result.candidate.median_ci_high),
        speedup=result.speedup,
        speedup_ci=(result.speedup_ci_low, result.speedup_ci_high),
        rounds=result.candidate.n,
        confidence=result.config.confidence,
    )


VALIDATION_FILE = "validation.json"
"""The end-of-search validation of a `tune` output folder (`ciq-tune report` shows it)."""


def relative_path(path: Path, start: Path) -> str:
    """`path` relative to `start` when possible (the controls file stays movable with it)."""
    return os.path.relpath(path.resolve(), start.resolve())
