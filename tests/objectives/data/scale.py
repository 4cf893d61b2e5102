"""y = 2·x as Triton kernels: a correct one and one that skips the last block (for the checker)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def scale_skips_tail(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < tl.minimum(n, (tl.num_programs(0) - 1) * BLOCK)
    tl.store(y_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask), mask=mask)


def twice(x):
    """Reference as a module function."""
    return 2.0 * x
