"""Flash-attention forward (non-causal), O = softmax(Q·Kᵀ / √d)·V, with tensor descriptors.

Adapted from the forward kernel of Triton's tutorial 06-fused-attention (Flash Attention v2,
Dao 2023): each program owns BLOCK_M query rows of one (batch, head), streams K and V in
BLOCK_N-row tiles through device-side tensor descriptors, and keeps a running maximum and sum
in base 2 (exp2 with log2(e) folded into the scale). The backward pass and the causal stages of
the tutorial are left out. Q, K, V and O are contiguous [Z, H, N_CTX, HEAD_DIM] fp16 tensors,
seen as [Z·H·N_CTX, HEAD_DIM] matrices by the descriptors.
"""

from __future__ import annotations

import triton
import triton.language as tl

# log2(e): exp(x) = exp2(x · log2(e)); a constexpr, the only kind of global a kernel may read.
LOG2_E = tl.constexpr(1.4426950408889634)


@triton.jit
def attention_fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    Z,
    H,
    N_CTX: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    """One BLOCK_M × HEAD_DIM tile of O per program; grid (N_CTX / BLOCK_M, Z·H)."""
    # A tile that crossed the end of a sequence would read the next head's rows.
    tl.static_assert(N_CTX % BLOCK_M == 0 and N_CTX % BLOCK_N == 0)
    dtype = o_ptr.dtype.element_ty
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    rows = Z * H * N_CTX
    desc_q = tl.make_tensor_descriptor(
        q_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM]
    )
    desc_k = tl.make_tensor_descriptor(
        k_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM]
    )
    desc_v = tl.make_tensor_descriptor(
        v_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM]
    )
    desc_o = tl.make_tensor_descriptor(
        o_ptr, shape=[rows, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM]
    )
    # First row of this (batch, head) in the [Z·H·N_CTX, HEAD_DIM] view, and of this tile.
    offset_y = off_hz * N_CTX
    qo_offset_y = offset_y + start_m * BLOCK_M

    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    # 1.0, not 0: the first tile's rescale factor exp2(-inf - m) is 0 and wipes it out.
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # The default scale of scaled_dot_product_attention, 1/√HEAD_DIM, in base 2.
    qk_scale = LOG2_E / tl.sqrt(tl.full([], HEAD_DIM, tl.float32))
    q = desc_q.load([qo_offset_y, 0])
    for start_n in tl.range(0, N_CTX, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = desc_k.load([offset_y + start_n, 0]).T
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([offset_y + start_n, 0])
        acc = tl.dot(p.to(dtype), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    desc_o.store([qo_offset_y, 0], acc.to(dtype))


def autotune_configs() -> list[triton.Config]:
    """The tutorial's `@triton.autotune` list for the forward kernel (the suite's baseline).

    BLOCK_M 64/128, BLOCK_N 32/64/128, 2–4 stages, 4/8 warps, without the tiles under
    128 × 128 at 8 warps, which the tutorial's `keep` drops on Hopper.
    """
    return [
        triton.Config(
            {"BLOCK_M": block_m, "BLOCK_N": block_n, "WARP_SPECIALIZE": False},
            num_stages=stages,
            num_warps=warps,
        )
        for block_m in (64, 128)
        for block_n in (32, 64, 128)
        for stages in (2, 3, 4)
        for warps in (4, 8)
        if not (block_m * block_n < 128 * 128 and warps == 8)
    ]
