"""Layer-norm forward y = (x − mean) / √(var + ε) · w + b over the last dimension of x[M, N].

Adapted from the forward kernel of Triton's tutorial 05-layer-norm: each program normalises
ROWS rows one after the other. When BLOCK_N ≥ N a row is held in registers (one read of x);
otherwise the tutorial's three passes over BLOCK_N-wide column chunks (mean, variance,
normalise) read it three times. Statistics are in fp32, ε = 1e-5 as in torch's default.
"""

from __future__ import annotations

import triton
import triton.language as tl

EPS = tl.constexpr(1e-5)


@triton.jit
def layer_norm_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    M,
    N: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,
):
    """Normalise rows [pid·ROWS, pid·ROWS + ROWS) of x[M, N] into y with weight w and bias b."""
    first_row = tl.program_id(0) * ROWS
    cols = tl.arange(0, BLOCK_N)
    if BLOCK_N >= N:
        col_mask = cols < N
        w = tl.load(w_ptr + cols, mask=col_mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=col_mask).to(tl.float32)
        for r in tl.static_range(ROWS):
            row = first_row + r
            if row < M:
                base = row.to(tl.int64) * N
                x = tl.load(x_ptr + base + cols, mask=col_mask, other=0.0).to(tl.float32)
                mean = tl.sum(x, axis=0) / N
                centered = tl.where(col_mask, x - mean, 0.0)
                rstd = 1 / tl.sqrt(tl.sum(centered * centered, axis=0) / N + EPS)
                y = centered * rstd * w + b
                tl.store(y_ptr + base + cols, y.to(y_ptr.dtype.element_ty), mask=col_mask)
    else:
        for r in tl.static_range(ROWS):
            row = first_row + r
            if row < M:
                base = row.to(tl.int64) * N
                partial = tl.zeros([BLOCK_N], dtype=tl.float32)
                for start in range(0, N, BLOCK_N):
                    c = start + cols
                    partial += tl.load(x_ptr + base + c, mask=c < N, other=0.0).to(tl.float32)
                mean = tl.sum(partial, axis=0) / N
                partial = tl.zeros([BLOCK_N], dtype=tl.float32)
                for start in range(0, N, BLOCK_N):
                    c = start + cols
                    x = tl.load(x_ptr + base + c, mask=c < N, other=0.0).to(tl.float32)
                    centered = tl.where(c < N, x - mean, 0.0)
                    partial += centered * centered
                rstd = 1 / tl.sqrt(tl.sum(partial, axis=0) / N + EPS)
                for start in range(0, N, BLOCK_N):
                    c = start + cols
                    mask = c < N
                    w = tl.load(w_ptr + c, mask=mask).to(tl.float32)
                    b = tl.load(b_ptr + c, mask=mask).to(tl.float32)
                    x = tl.load(x_ptr + base + c, mask=mask, other=0.0).to(tl.float32)
                    y = (x - mean) * rstd * w + b
                    tl.store(y_ptr + base + c, y.to(y_ptr.dtype.element_ty), mask=mask)


def autotune_configs() -> list[triton.Config]:
    """A small `@triton.autotune` list for the suite's baseline.

    Tutorial 05 has no autotune list: it takes BLOCK_N = min(64 KB / element size, next power
    of two ≥ N) and num_warps = min(max(BLOCK_N / 256, 1), 8), one row per program. This list
    spans those choices: BLOCK_N 1024–8192, 4–16 warps, one row per program.
    """
    return [
        triton.Config({"BLOCK_N": block_n, "ROWS": 1}, num_warps=warps)
        for block_n in (1024, 2048, 4096, 8192)
        for warps in (4, 8, 16)
    ]
