"""y = 2·x in blocks, shipped with its own `@triton.autotune` over the block (one configuration,
which Triton's interpreter can launch) and a grid of that meta-parameter, as production code
writes it: ``kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)``."""

import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2)], key=["n"])
@triton.jit
def blocked_scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y[i] = 2 x[i] for the BLOCK elements of this program."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=mask), mask=mask)
