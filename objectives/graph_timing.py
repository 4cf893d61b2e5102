"""A second timing method, for cross-checks: launches replayed from a CUDA graph, timed with
CUDA events around the whole graph.

`objectives.protocol` times each launch between two events after an L2 flush (`do_bench`). This
method shares none of its host path: it captures `launches` × (L2 flush, launch) into one CUDA
graph and, separately, the same flushes alone; the kernel's time is the difference of the two
graphs' replay times over `launches`. Launch overhead, event placement and the per-launch host
loop are gone, so a disagreement between the two methods points at the measurement, not at the
kernel.
"""

from __future__ import annotations

from collections.abc import Callable

from objectives._arrays import TORCH
from objectives._arrays import ArrayLibrary
from objectives.protocol import FLUSH_BYTES

# Aimed duration of one graph replay (ms): long enough that the events' resolution (~0.5 µs)
# and the graph's own launch are negligible.
REPLAY_MS = 40.0
MAX_LAUNCHES = 500


def time_cuda_graph(
    run: Callable[[int], object], n_rotate: int, *, arrays: ArrayLibrary = TORCH
) -> float:
    """Milliseconds per launch of ``run(i)`` (i rotating over `n_rotate` input sets), each launch
    preceded by an L2 flush, from CUDA-graph replays timed with CUDA events.

    Args:
        run: Launches the kernel on input set ``i`` on the current stream (capturable: no
            synchronisation, no allocation of new memory after the first call).
        n_rotate: Number of input sets.
        arrays: The kernel's array library (torch; CuPy for CUDA C++), whose streams, events
            and graphs are used.

    Raises:
        RuntimeError: the launches cannot be captured into a CUDA graph.
    """
    flush = arrays.empty_int32(FLUSH_BYTES // 4)
    with arrays.side_stream():
        # Warm-up on a capture stream: compiles, allocates and sizes one launch.
        for i in range(n_rotate):
            run(i)
    arrays.synchronize()
    start, end = arrays.event(), arrays.event()
    start.record()
    for i in range(n_rotate):
        arrays.zero_(flush)
        run(i)
    end.record()
    arrays.synchronize()
    estimate_ms = max(arrays.elapsed_ms(start, end) / n_rotate, 1e-3)
    launches = max(n_rotate, min(MAX_LAUNCHES, int(REPLAY_MS / estimate_ms)))

    def launches_of(with_kernel: bool) -> Callable[[], None]:
        def body() -> None:
            for k in range(launches):
                arrays.zero_(flush)
                if with_kernel:
                    run(k % n_rotate)

        return body

    both, flushes = arrays.capture(launches_of(True)), arrays.capture(launches_of(False))

    def replay_ms(replay: Callable[[], object]) -> float:
        replay()  # untimed: the first replay uploads the graph
        start.record()
        replay()
        end.record()
        arrays.synchronize()
        return arrays.elapsed_ms(start, end)

    return (replay_ms(both) - replay_ms(flushes)) / launches
