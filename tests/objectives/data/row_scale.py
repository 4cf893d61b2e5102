"""y = 2·x row by row, a third-party-style Triton kernel: it takes the row length but not the
row count, which only the launch grid uses (a `sizes_not_passed` size)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def row_scale_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * n_cols + offs, mask=mask)
        tl.store(y_ptr + row * n_cols + offs, 2.0 * x, mask=mask)


@triton.jit
def row_scale_fixed(x_ptr, y_ptr, n_cols: tl.constexpr, BLOCK: tl.constexpr):
    """`row_scale_kernel` with the row length a compile-time value (one kernel per length);
    rows longer than 256 are refused at compile time."""
    tl.static_assert(n_cols <= 256, "rows of at most 256 values")
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * n_cols + offs, mask=mask)
        tl.store(y_ptr + row * n_cols + offs, 2.0 * x, mask=mask)
