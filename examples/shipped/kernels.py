"""Three Triton kernels as public projects ship them, written here in their conventions (not
their code), for tuning with no edit to the kernels:

- `rms_norm_forward`: Liger-Kernel's norms — each pointer followed by its row stride, the
  column count and epsilon as arguments, the block and warps chosen by the caller from the
  column count (`launch_settings`).
- `matmul_kernel`: the Triton tutorial's matmul — its own ``@triton.autotune`` over tiles,
  warps and stages keyed on ``M, N, K``, a grid of the autotuned tiles (``cdiv(M, BM) *
  cdiv(N, BN)``), grouped tile order.
- `swiglu_forward`: Liger-Kernel's SwiGLU — one row per program, the column count a
  ``tl.constexpr``, one stride for the three tensors.
"""

import triton
import triton.language as tl


def launch_settings(n_cols: int) -> tuple[int, int]:
    """The block and warps a row-wise kernel is launched with by its project: the power of two
    that holds a row, and more warps for longer rows."""
    block = triton.next_power_of_2(n_cols)
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, warps


@triton.jit
def rms_norm_forward(
    Y_ptr,
    Y_row_stride,
    X_ptr,
    X_row_stride,
    W_ptr,
    W_row_stride,
    RSTD_ptr,
    RSTD_row_stride,
    n_cols,
    eps,
    BLOCK_SIZE: tl.constexpr,
):
    """y = x / rms(x) · w per row, in fp32, with 1 / rms kept for the backward pass."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W_ptr + cols * W_row_stride, mask=mask, other=0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(RSTD_ptr + row * RSTD_row_stride, rstd)
    y = x * rstd * w
    tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)


def _matmul_configs() -> list[triton.Config]:
    tiles = [  # (BM, BN, BK, GROUP, stages, warps)
        (128, 256, 64, 8, 3, 8),
        (64, 256, 32, 8, 4, 4),
        (128, 128, 32, 8, 4, 4),
        (128, 64, 32, 8, 4, 4),
        (64, 128, 32, 8, 4, 4),
        (128, 32, 32, 8, 4, 4),
        (64, 32, 32, 8, 5, 2),
        (32, 64, 32, 8, 5, 2),
    ]
    return [
        triton.Config(
            {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": g},
            num_stages=s,
            num_warps=w,
        )
        for m, n, k, g, s, w in tiles
    ]


@triton.autotune(configs=_matmul_configs(), key=["M", "N", "K"])
@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    """C = A @ B, one BLOCK_SIZE_M × BLOCK_SIZE_N tile of C per program, tiles visited in
    groups of GROUP_SIZE_M rows so that neighbouring programs share A's rows in L2."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * tiles_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    group_rows = min(tiles_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + ((pid % per_group) % group_rows)
    pid_n = (pid % per_group) // group_rows
    rows = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    cols = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    inner = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + rows[:, None] * stride_am + inner[None, :] * stride_ak
    b_tile = b_ptr + inner[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        left = K - k * BLOCK_SIZE_K
        a = tl.load(a_tile, mask=inner[None, :] < left, other=0.0)
        b = tl.load(b_tile, mask=inner[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_SIZE_K * stride_ak
        b_tile += BLOCK_SIZE_K * stride_bk
    out_rows = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_tile = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_forward(a_ptr, b_ptr, c_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """c = silu(a) · b per row (the gate in fp32)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0)
    c = (a * tl.sigmoid(a)).to(b.dtype) * b
    tl.store(c_ptr + row * stride + cols, c, mask=mask)
