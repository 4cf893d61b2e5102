"""Row-wise softmax y = exp(x − max x) / Σ exp(x − max x) of an M × N matrix, one row in registers.

Adapted from Triton's tutorial 02-fused-softmax: a fixed number of programs stride over the
rows (software-pipelined by `tl.range(num_stages=LOOP_STAGES)`), each loading ROWS whole rows
of BLOCK_N ≥ N columns at a time, so x is read once and y written once.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(
    x_ptr,
    y_ptr,
    M,
    N: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_SMS: tl.constexpr,
    ROWS: tl.constexpr,
    PROGRAMS_PER_SM: tl.constexpr,
    LOOP_STAGES: tl.constexpr,
):
    """Softmax of each row of x[M, N] into y[M, N]; the grid's size is the number of programs."""
    tl.static_assert(BLOCK_N >= N, "BLOCK_N must hold a whole row")
    first_row = tl.program_id(0) * ROWS
    row_step = tl.num_programs(0) * ROWS
    cols = tl.arange(0, BLOCK_N)
    for row_start in tl.range(first_row, M, row_step, num_stages=LOOP_STAGES):
        rows = row_start + tl.arange(0, ROWS)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offsets = rows[:, None].to(tl.int64) * N + cols[None, :]
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        # -inf padding columns leave the maximum and (exp(-inf) = 0) the sum unchanged; rows
        # past M stay finite (never stored), so no NaN is computed.
        x = tl.where(cols[None, :] < N, x, -float("inf"))
        numerator = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = numerator / tl.sum(numerator, axis=1)[:, None]
        tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def autotune_configs() -> list[triton.Config]:
    """A small `@triton.autotune` list for the suite's baseline.

    Tutorial 02 has no autotune list: it picks 8 warps, 4 pipeline stages when the GPU has
    more than 200 KB of shared memory, and as many programs as fit on the SMs. This list spans
    those choices: 4–32 warps, 2 or 4 stages, 4 or 8 programs per SM, one row at a time.
    """
    return [
        triton.Config(
            {"ROWS": 1, "PROGRAMS_PER_SM": programs, "LOOP_STAGES": stages}, num_warps=warps
        )
        for warps in (4, 8, 16, 32)
        for stages in (2, 4)
        for programs in (4, 8)
    ]
