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

# Bytes zeroed before each launch to evict the previous launch's data from L2 (as do_bench).
FLUSH_BYTES = 256 * 2**20
# Aimed duration of one graph replay (ms): long enough that the events' resolution (~0.5 µs)
# and the graph's own launch are negligible.
REPLAY_MS = 40.0
MAX_LAUNCHES = 500


def time_cuda_graph(run: Callable[[int], object], n_rotate: int) -> float:
    """Milliseconds per launch of ``run(i)`` (i rotating over `n_rotate` input sets), each launch
    preceded by an L2 flush, from CUDA-graph replays timed with CUDA events.

    Args:
        run: Launches the kernel on input set ``i`` on the current stream (capturable: no
            synchronisation, no allocation of new memory after the first call).
        n_rotate: Number of input sets.

    Raises:
        RuntimeError: the launches cannot be captured into a CUDA graph.
    """
    import torch

    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # Warm-up on the capture stream: compiles, allocates and sizes one launch.
        for i in range(n_rotate):
            run(i)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(n_rotate):
        flush.zero_()
        run(i)
    end.record()
    torch.cuda.synchronize()
    estimate_ms = max(start.elapsed_time(end) / n_rotate, 1e-3)
    launches = max(n_rotate, min(MAX_LAUNCHES, int(REPLAY_MS / estimate_ms)))

    def capture(with_kernel: bool) -> torch.cuda.CUDAGraph:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for k in range(launches):
                flush.zero_()
                if with_kernel:
                    run(k % n_rotate)
        return graph

    both, flushes = capture(True), capture(False)

    def replay_ms(graph: torch.cuda.CUDAGraph) -> float:
        graph.replay()  # untimed: the first replay uploads the graph
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        return float(start.elapsed_time(end))

    return (replay_ms(both) - replay_ms(flushes)) / launches
