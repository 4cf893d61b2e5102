"""Correctness check of a kernel's output against the reference."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from objectives._arrays import TORCH
from objectives._arrays import ArrayLibrary


@dataclass(frozen=True)
class CheckResult:
    """Outcome of comparing a kernel's output with the reference.

    Attributes:
        ok: Whether every element is within tolerance (and none is NaN).
        max_abs_err: Largest absolute difference (NaN if any output element is NaN).
        rel_err: ‖out − ref‖₂ / ‖ref‖₂ in float64.
        message: Empty when `ok`, else what was wrong, with counts.
    """

    ok: bool
    max_abs_err: float
    rel_err: float
    message: str


def compare(
    out: Any, ref: Any, *, rtol: float, atol: float, arrays: ArrayLibrary = TORCH
) -> CheckResult:
    """Compare `out` with `ref` element-wise: |out − ref| <= atol + rtol·|ref|, NaN never passes.

    Args:
        out: The kernel's output (a torch tensor, or a CuPy array with `arrays` = CuPy).
        ref: The reference output, same shape (moved to `out`'s device).
        rtol: Relative tolerance.
        atol: Absolute tolerance.
        arrays: The library of `out` and `ref`.

    Returns:
        The check's outcome; a shape mismatch is a failed check, not an exception.
    """
    xp = arrays.xp
    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(
            False, math.nan, math.nan, f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
        )
    # float64 on the output's device: a 4096² check stays on the GPU instead of a host copy.
    o = arrays.float64(out)
    r = arrays.float64(ref, like=o)
    nan_out = int(xp.isnan(o).sum())
    nan_ref = xp.isnan(r)
    diff = xp.abs(o - r)
    bad = ~(diff <= atol + rtol * xp.abs(r))
    # An element whose reference is NaN too is a computed NaN, not an unwritten one.
    bad &= ~(xp.isnan(o) & nan_ref)
    n_bad = int(bad.sum())
    ref_norm = arrays.norm(xp.nan_to_num(r))
    err_norm = arrays.norm(xp.nan_to_num(o - r, nan=math.inf))
    rel = err_norm / ref_norm if ref_norm > 0 else err_norm
    count = math.prod(o.shape)
    max_abs = float(diff.max()) if count else 0.0
    if n_bad == 0:
        return CheckResult(True, max_abs, rel, "")
    worst = int(xp.argmax(xp.nan_to_num(diff, nan=math.inf)))
    msg = (
        f"{n_bad} of {count} elements outside atol={atol} rtol={rtol}"
        f" ({nan_out} NaN, i.e. unwritten or invalid); worst at flat index {worst}:"
        f" got {o.flatten()[worst].item()!r}, expected {r.flatten()[worst].item()!r}"
    )
    return CheckResult(False, max_abs, rel, msg)
