"""Helion kernels for the Helion objective's tests: out = 2·x, and one that computes 3·x."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def scale(x: torch.Tensor, out: torch.Tensor) -> None:
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 2.0


@helion.kernel(static_shapes=True)
def scale_wrong(x: torch.Tensor, out: torch.Tensor) -> None:
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * 3.0


def not_a_kernel(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x * 2.0)
