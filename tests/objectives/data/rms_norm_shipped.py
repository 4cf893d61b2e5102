"""An RMS-norm forward kernel written the way production Triton kernels ship (the convention of
Liger-Kernel's norms, not its code): output and input pointers each followed by their row stride,
the column count and epsilon as arguments, a `@triton.heuristics` that derives the block from the
column count and, on `rms_norm_forward`, its own `@triton.autotune` over warps. The tests tune
them as they are. `rms_norm_heuristic` has no autotuner, so Triton's interpreter can launch it as
shipped (an autotuner with several configurations needs a GPU to time them)."""

import triton
import triton.language as tl


def _block_from_columns(fn):
    return triton.heuristics({"BLOCK_SIZE": lambda args: triton.next_power_of_2(args["n_cols"])})(
        fn
    )


@triton.jit
def rms_norm_body(
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


rms_norm_heuristic = _block_from_columns(rms_norm_body)
rms_norm_forward = triton.autotune(
    configs=[triton.Config({}, num_warps=2), triton.Config({}, num_warps=4)], key=["n_cols"]
)(_block_from_columns(rms_norm_body))
