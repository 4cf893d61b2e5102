"""Triton kernels that fail on a GPU, for the fault-injected campaign of bench.campaign_scaling:
one that never returns (spins on a flag that stays set) and one that writes far outside its
output (an illegal address, which poisons its CUDA context)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def spin_kernel(flag_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    # The flag input is all ones and nothing clears it: the loop never ends.
    while tl.load(flag_ptr, volatile=True) != 0:
        pass
    tl.store(y_ptr + offs, 2.0 * tl.load(flag_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def wild_store_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    far = offs.to(tl.int64) * 1_000_000_000_000
    tl.store(y_ptr + far, 2.0 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
