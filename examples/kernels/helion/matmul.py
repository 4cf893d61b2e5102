"""fp16 matrix product out = x·y as a Helion kernel, after Helion's examples/matmul.py.

Two differences from Helion's example, both for ciq-tune's harness: the result goes into `out`,
an argument, instead of a tensor the kernel allocates (the harness poisons outputs before a run
and checks them after, so a Config that skips tiles fails), and there is no epilogue argument
(a callable is not an input a description can create). The kernel is defined at module level:
Helion's autotuner and ciq-tune's worker import it by module.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(
    # Helion's example: static shapes give a performance boost for matmuls.
    static_shapes=True,
    # As in Helion's example, tl.dot is pipelined through num_stages, so range unrolling is
    # fixed; ciq-tune leaves fields fixed here out of its search space too. Helion's example also
    # fixes range_num_stages = [0, 0]; Helion 1.2 already drops that field for a kernel that
    # writes an argument (a Triton bug workaround), and an override of it would be invalid.
    autotune_config_overrides={"range_unroll_factors": [0, 0]},
)
def matmul(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out[m, n] = sum_k x[m, k] · y[k, n], accumulated in fp32."""
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out
