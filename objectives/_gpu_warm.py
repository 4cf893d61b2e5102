"""Imported by a GPU's benchmark worker as it starts (`objectives._stages.benchmark_worker`):
the CUDA context, cuBLAS's handle (the references' matmuls) and Triton's driver module (built by
the host's C compiler on a cold cache) are made then, beside the search's first compiles,
instead of inside the first candidate's load and timing. Nothing happens without a GPU."""

from __future__ import annotations

import contextlib


def warm() -> None:
    """Make this process's CUDA context, cuBLAS handle and Triton driver now. A failure is
    left to the first candidate, which reports it."""
    try:
        import torch
    except ImportError:  # a kind without torch (CuPy's): nothing to warm here
        return
    if not torch.cuda.is_available():
        return
    with contextlib.suppress(Exception):
        square = torch.ones(16, 16, device="cuda")
        torch.matmul(square, square)
        torch.cuda.synchronize()
        import triton

        triton.runtime.driver.active.get_current_device()


warm()
