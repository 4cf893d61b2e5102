"""Cut-offs of a matrix's timing rounds: a configuration whose timed launch at a shape already
takes `CUTOFF_FACTOR` times the best time seen there is not timed further at that shape.

A search or a sweep of a matrix times most configurations at most shapes far from the best
(small tiles on a large GEMM take tens of milliseconds a launch), and a full round of such a
pair (a warm-up, then at least five launches) is GPU time that decides nothing: the pair is no
winner. So, as autotuners that time every candidate briefly and only the close ones again do
(Helion's re-benchmarks the members within a threshold of its best), each request of a matrix
carries a cut-off per shape, and a round ends where a timed launch reaches it (one launch of
at least `objectives.protocol.CUT_FROM_MS`, or the five of the round's estimate for a kernel
timed launch by launch), with that time as its value (`objectives.protocol.time_cuda`; the
result's ``cut@i``). The best times come from full rounds only, so the cut-offs never rest on
a cut value.

`Cutoffs` wraps a GPU's `objectives._stages.Benchmarker` for one description: the requests of one
process's trials share it (a local search). Copied into each trial of a Ray Tune run, each copy
starts with no best time and cuts nothing.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from objectives._stages import Benchmarker
from objectives._stages import BenchmarkRequest
from objectives.description import KernelDescription
from objectives.matrix import NATIVE_MATRIX_KINDS

CUTOFF_FACTOR = 2.0
"""A shape's cut-off as a multiple of the best time seen there. The timed launch is a single
launch that the round's warm-up has not steadied, so the margin is wide: a configuration within
it of the best gets its full round."""


class Cutoffs:
    """A `Benchmarker` that gives each request of `desc`'s matrix the cut-off of every shape
    (``payload["cutoff_ms"]``) and learns the best times from the results.

    Args:
        benchmark: Where the requests are served (a GPU's benchmark workers).
        desc: The description whose matrix the requests time: a time in ms, lower is better,
            of a kind whose worker times the whole matrix in one request (else nothing is cut).
        factor: The cut-off as a multiple of the best time seen at the shape.
    """

    def __init__(
        self, benchmark: Benchmarker, desc: KernelDescription, factor: float = CUTOFF_FACTOR
    ) -> None:
        if not factor > 1:
            raise ValueError(f"`factor` must be > 1, got factor={factor}")
        self._benchmark = benchmark
        self._factor = factor
        self._metric = desc.metric
        self._best = [math.inf] * len(desc.matrix())
        self.cutting = (
            desc.kind in NATIVE_MATRIX_KINDS
            and bool(desc.shapes)
            and desc.metric == "time_ms"
            and desc.mode == "min"
        )

    def cutoffs_ms(self) -> list[float | None]:
        """Each shape's cut-off now (None before a full round there)."""
        return [self._factor * b if math.isfinite(b) else None for b in self._best]

    def __call__(self, request: BenchmarkRequest) -> dict[str, Any]:
        """Serve `request` with the current cut-offs, then keep its full rounds' best times."""
        if not self.cutting:
            return self._benchmark(request)
        cutoffs = self.cutoffs_ms()
        if any(c is not None for c in cutoffs):
            payload = {**request.payload, "cutoff_ms": cutoffs}
            request = dataclasses.replace(request, payload=payload)
        result = self._benchmark(request)
        for i, best in enumerate(self._best):
            value = result.get(f"{self._metric}@{i}")
            full = result.get(f"status@{i}") == "ok" and not result.get(f"cut@{i}")
            if full and isinstance(value, float) and value < best:
                # A race between two threads can only keep the larger of two new bests: a wider
                # cut-off, never a wrong one.
                self._best[i] = value
        return result
