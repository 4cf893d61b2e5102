"""Tasks for the isolation tests: each misbehaves in one way a kernel candidate can."""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from typing import Any


def echo(payload: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    """Compile instantly, then return the payload and the worker's pid."""
    progress("compiled")
    return {"status": "ok", "payload": payload, "pid": os.getpid()}


def wrong(payload: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    """A checked failure that leaves the worker sound."""
    progress("compiled")
    return {"status": "wrong_result", "error": "3 elements differ", "pid": os.getpid()}


def hang_compile(payload: float, progress: Callable[[str], None]) -> dict[str, Any]:
    """Never finish compiling (sleeps `payload` seconds)."""
    time.sleep(payload)
    progress("compiled")
    return {"status": "ok"}


def hang_run(payload: float, progress: Callable[[str], None]) -> dict[str, Any]:
    """Compile, then hang in the run phase for `payload` seconds."""
    progress("compiled")
    time.sleep(payload)
    return {"status": "ok"}


def segfault(payload: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    """Dereference NULL, as a kernel launch gone wrong in the driver would."""
    progress("compiled")
    ctypes.string_at(0)
    return {"status": "ok"}


def raise_error(payload: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    """Raise the kind of error a CUDA illegal address surfaces as in Python."""
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def bad_result(payload: Any, progress: Callable[[str], None]) -> Any:
    """Return something that is not a result dict."""
    return 42


_LEAKED: list[bytearray] = []


def leak(payload: int, progress: Callable[[str], None]) -> dict[str, Any]:
    """Keep `payload` MB more memory alive after every call (a leaking kernel library)."""
    _LEAKED.append(bytearray(payload * 1_000_000))
    with open(f"/proc/{os.getpid()}/status") as f:
        rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return {"status": "ok", "pid": os.getpid(), "rss_mb": rss_kib / 1024.0}


def sleep_and_echo(payload: float, progress: Callable[[str], None]) -> dict[str, Any]:
    """Report compiled, sleep `payload` seconds and return this worker's pid and environment."""
    progress("compiled")
    time.sleep(payload)
    return {"status": "ok", "pid": os.getpid(), "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}


def niceness(payload: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    """The worker's niceness."""
    progress("compiled")
    return {"status": "ok", "nice": os.nice(0)}


def modules(payload: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    """Whether the worker has imported the module named by the payload."""
    import sys

    progress("compiled")
    return {"status": "ok", "loaded": payload in sys.modules}
