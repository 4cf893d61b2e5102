"""A Llama-style MLP block launched with the kernels of `kernels` as their projects call them:
``x + down(silu(gate(rms_norm(x))) · up(rms_norm(x)))``. Each launch helper looks its kernel up
in `kernels` at call time, so a program can swap in a tuned one
(``kernels.matmul_kernel = ciq_tune.runtime.tuned(file)(kernels.matmul_kernel)``)."""

from __future__ import annotations

import torch
import triton

from examples.shipped import kernels


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    rows, cols = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    block, warps = kernels.launch_settings(cols)
    kernels.rms_norm_forward[(rows,)](
        y,
        y.stride(0),
        x,
        x.stride(0),
        w,
        w.stride(0),
        rstd,
        rstd.stride(0),
        cols,
        eps,
        BLOCK_SIZE=block,
        num_warps=warps,
    )
    return y


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (m, k), (_, n) = a.shape, b.shape
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)

    def grid(meta: dict[str, int]) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)

    kernels.matmul_kernel[grid](
        a,
        b,
        c,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
    )
    return c


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    rows, cols = a.shape
    c = torch.empty_like(a)
    block, warps = kernels.launch_settings(cols)
    kernels.swiglu_forward[(rows,)](
        a, b, c, c.stride(0), n_cols=cols, BLOCK_SIZE=block, num_warps=warps
    )
    return c


class MLPBlock:
    """The block's weights (bf16, ``[in, out]``) and its forward pass."""

    def __init__(self, hidden: int, intermediate: int, device: str, seed: int = 0) -> None:
        gen = torch.Generator(device=device).manual_seed(seed)

        def weight(rows: int, cols: int) -> torch.Tensor:
            w = torch.randn(rows, cols, generator=gen, device=device) / rows**0.5
            return w.to(torch.bfloat16)

        self.norm = torch.ones(hidden, dtype=torch.bfloat16, device=device)
        self.gate, self.up = weight(hidden, intermediate), weight(hidden, intermediate)
        self.down = weight(intermediate, hidden)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        h = rms_norm(x, self.norm)
        return x + matmul(swiglu(matmul(h, self.gate), matmul(h, self.up)), self.down)
