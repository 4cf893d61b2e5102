"""Persistent fp16 matrix product C = A·Bᵀ with device-side tensor descriptors (TMA on Hopper).

Adapted from Triton's tutorial 09-persistent-matmul (`matmul_kernel_descriptor_persistent`):
NUM_SMS programs walk the output tiles in grouped order, loading A and B tiles through tensor
descriptors made on the device (`tl.make_tensor_descriptor`, whose 128-byte descriptors live in
a global scratch buffer: the launching process must call `triton.set_allocator`, which
ciq-tune's Triton objective does). B is stored N×K (K contiguous), as in the tutorial, so both
operands are K-major.

Launch convention of ciq-tune's Triton objective: tensors in the order of the description's
`inputs`, then the `sizes` and the kernel parameters as keyword arguments (by name).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _tile_coordinates(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    """Row and column of a tile in grouped order: GROUP_M row-tiles share each B column in L2."""
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def matmul_persistent_kernel(
    a_ptr,
    bt_ptr,
    c_ptr,
    M,
    N,
    K,
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr,
    FLATTEN: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    """C[M, N] = A[M, K] · Bt[N, K]ᵀ in fp32, stored as fp16; one program per SM."""
    dtype = c_ptr.dtype.element_ty
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n

    a_desc = tl.make_tensor_descriptor(
        a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K]
    )
    b_desc = tl.make_tensor_descriptor(
        bt_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K]
    )
    # A subtiled epilogue stores two BLOCK_M × BLOCK_N/2 halves: half the shared memory for the
    # store, which leaves room for one more pipeline stage.
    c_desc = tl.make_tensor_descriptor(
        c_ptr,
        shape=[M, N],
        strides=[N, 1],
        block_shape=[BLOCK_M, BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N],
    )

    # A separate epilogue counter breaks the dependency between the loop's prologue and epilogue
    # (the tutorial's workaround, which lets the flattened loop pipeline across tiles).
    tile_id_c = start_pid - NUM_SMS
    num_pid_in_group = GROUP_M * num_pid_n

    for tile_id in tl.range(
        start_pid, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE
    ):
        pid_m, pid_n = _tile_coordinates(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N

        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_bn, offs_k])
            accumulator = tl.dot(a, b.T, accumulator)

        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile_coordinates(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N

        if EPILOGUE_SUBTILE:
            acc = tl.reshape(accumulator, (BLOCK_M, 2, BLOCK_N // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            c_desc.store([offs_cm, offs_cn], acc0.to(dtype))
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], acc1.to(dtype))
        else:
            c_desc.store([offs_cm, offs_cn], accumulator.to(dtype))


def autotune_configs() -> list[triton.Config]:
    """The tutorial's `@triton.autotune` list for this kernel on Hopper (the suite's baseline).

    `matmul_tma_persistent_get_configs` of tutorial 09 (BLOCK_M 128, BLOCK_N 128/256, BLOCK_K
    64/128, GROUP_M 8, 2–4 stages, 4/8 warps, with and without a subtiled epilogue), launched
    as the tutorial launches it on Hopper without warp specialization (FLATTEN on).
    """
    return [
        triton.Config(
            {
                "BLOCK_M": 128,
                "BLOCK_N": block_n,
                "BLOCK_K": block_k,
                "GROUP_M": 8,
                "EPILOGUE_SUBTILE": subtile,
                "FLATTEN": True,
                "WARP_SPECIALIZE": False,
            },
            num_stages=stages,
            num_warps=warps,
        )
        for block_n in (128, 256)
        for block_k in (64, 128)
        for stages in (2, 3, 4)
        for warps in (4, 8)
        for subtile in (True, False)
    ]
