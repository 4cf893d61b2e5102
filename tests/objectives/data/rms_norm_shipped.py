"""An RMS-norm forward kernel written the way production Triton kernels ship (the convention of
Liger-Kernel's norms, not its code): output and input pointers each followed by their row stride,
the column count and epsilon as arguments, its own `@triton.autotune` over warps, and a
`@triton.heuristics` that derives the block from the column count. The tests tune it as it is."""

import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({}, num_warps=2), triton.Config({}, num_warps=4)], key=["n_cols"]
)
@triton.heuristics({"BLOCK_SIZE": lambda args: triton.next_power_of_2(args["n_cols"])})
@triton.jit
def rms_norm_forward(
    Y_ptr,
    Y_row_stride,
    X_ptr,
    X_row_stride,
    W_ptr,
    n_cols,
    eps,
    BLOCK_SIZE: tl.constexpr,
):
    """y[row] = x[row] / sqrt(mean(x[row]²) + eps) · w, one row per program."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(Y_ptr + row * Y_row_stride + cols, x * rstd * w, mask=mask)
