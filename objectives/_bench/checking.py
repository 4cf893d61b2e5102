"""Correctness check of a kernel's output against the reference."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


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


def compare(out: torch.Tensor, ref: torch.Tensor, *, rtol: float, atol: float) -> CheckResult:
    """Compare `out` with `ref` element-wise: |out − ref| <= atol + rtol·|ref|, NaN never passes.

    Args:
        out: The kernel's output.
        ref: The reference output, same shape (moved to `out`'s device).
        rtol: Relative tolerance.
        atol: Absolute tolerance.

    Returns:
        The check's outcome; a shape mismatch is a failed check, not an exception.
    """
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(
            False, math.nan, math.nan, f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
        )
    # float64 on the output's device: a 4096² check stays on the GPU instead of a host copy.
    o = out.detach().to(torch.float64)
    r = ref.detach().to(o.device, torch.float64)
    nan_out = int(torch.isnan(o).sum())
    nan_ref = torch.isnan(r)
    diff = (o - r).abs()
    bad = ~(diff <= atol + rtol * r.abs())
    # An element whose reference is NaN too is a computed NaN, not an unwritten one.
    bad &= ~(torch.isnan(o) & nan_ref)
    n_bad = int(bad.sum())
    ref_norm = float(torch.linalg.vector_norm(torch.nan_to_num(r)))
    err_norm = float(torch.linalg.vector_norm(torch.nan_to_num(o - r, nan=math.inf)))
    rel = err_norm / ref_norm if ref_norm > 0 else err_norm
    max_abs = float(diff.max()) if diff.numel() else 0.0
    if n_bad == 0:
        return CheckResult(True, max_abs, rel, "")
    worst = int(torch.argmax(torch.nan_to_num(diff, nan=math.inf)))
    msg = (
        f"{n_bad} of {o.numel()} elements outside atol={atol} rtol={rtol}"
        f" ({nan_out} NaN, i.e. unwritten or invalid); worst at flat index {worst}:"
        f" got {o.flatten()[worst].item()!r}, expected {r.flatten()[worst].item()!r}"
    )
    return CheckResult(False, max_abs, rel, msg)
