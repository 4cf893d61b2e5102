"""The measurement protocol: how one round of a kernel's timing is taken, in the search and in
every re-measurement.

A *round* is one call of `measure_round`: `warmup_ms` of untimed launches (on the per-GPU
benchmark server `busy_warmup_ms` when it ran a round a moment ago, so the GPU is still at its
loaded clock), then `rep_ms` of timed launches (`time_cuda`: `triton.testing.do_bench`'s
procedure over the kernel's array library, torch or CuPy; CUDA events, the L2 cache cleared
before every launch), each launch reading the next of the `timing_sets` input sets (rotating
inputs so that no launch finds its inputs in L2 from the previous one). The round's value is
the median of its launches; the GPU's SM clock and temperature read right after it are
recorded with it. A trial of the search is one round (`objectives._bench.check_and_time`); a
re-measurement is many rounds, interleaved between the configurations compared
(`objectives.remeasure`); so a configuration's in-search value and its re-measured value are
draws of the same quantity.

Public API (small on purpose; other measurements build on it):

- `MeasurementProtocol` / `DEFAULT_PROTOCOL`: the settings of a round.
- `measure_round(run, n_rotate, device=..., protocol=...) -> TimingStats`: one round.
- `TimingStats`: a round's statistics (median, spread, clock, temperature).
- `summarize(times_ms, timer=...)`: statistics of repetitions already taken.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import replace
from typing import Any

import numpy as np

from objectives._arrays import TORCH
from objectives._arrays import ArrayLibrary
from objectives._nvml import gpu_conditions

# Bytes zeroed before each timed launch to evict the previous launch's data from L2 (256 MiB,
# as `triton.testing.do_bench`: five times an H200's 50 MB L2).
FLUSH_BYTES = 256 * 2**20


@dataclass(frozen=True)
class MeasurementProtocol:
    """How one round of timing is taken.

    Attributes:
        warmup_ms: untimed launches before the timed ones after the GPU idled, milliseconds.
            Long enough for a power-limited GPU to settle at the clock it sustains under this
            kernel: on an H200 a 4096³ fp16 matmul timed after 10 ms of warm-up ran at
            1905 MHz in the search (the GPU idle between trials) and at 1455-1755 MHz in
            back-to-back re-measurement rounds, 17 % slower (docs/benchmarks.md, "Trust in
            the numbers").
        busy_warmup_ms: the warm-up of a round that starts within `busy_gap_ms` of this
            process's previous round, milliseconds; None: always `warmup_ms`. Only the per-GPU
            benchmark server, which times candidates back to back, uses it
            (`BACK_TO_BACK_PROTOCOL`): there the GPU never leaves its loaded clock, and the long
            warm-up would cap it at ~6 candidates/s. Re-measurements keep the full warm-up:
            with 10 ms their rounds' duty cycle, and with it a power-limited matmul's clock,
            depended on what else was being re-measured (4-7 % apart on the H200).
        busy_graph_warmup_ms: the warm-up of a busy round of a micro-second kernel (timed from
            graph replays, `GRAPH_BELOW_MS`), milliseconds; None: `busy_warmup_ms`. Such a
            kernel draws too little power to move a loaded GPU's clock, and 10 ms of warm-up
            would be most of its round.
        busy_gap_ms: the longest gap between two rounds of one process after which the GPU
            still counts as busy, milliseconds.
        rep_ms: total duration of the timed launches, milliseconds. 40 ms is ~130 launches of
            a 0.2 ms kernel (with the L2 flush before each): the median's standard error is
            then ~0.2 % at a 2 % CV.
        max_repeats: at most this many timed launches: a kernel of a few tens of
            micro-seconds would fill `rep_ms` with ~400 flushed launches, where 100 give the
            median to ~0.25 % at a 2 % CV (kernels under `GRAPH_BELOW_MS` are timed from graph
            replays instead).
        host_reps: timed repetitions on the CPU path (Triton's interpreter, host clock).
        rotate_bytes: bytes of input sets to rotate through (about twice an H100's or H200's
            50 MB L2).
        max_rotate: at most this many input sets.
        l2: ``"cold"``: L2 flushed and the input sets rotated before each timed launch (or
            replay), so a kernel reads its inputs from memory; ``"warm"``: one input set and
            no flush, so the kernel finds in L2 what fits there, as in a model right after the
            kernel that wrote its inputs (a description's `l2`; `for_description`).
    """

    warmup_ms: float = 100.0
    busy_warmup_ms: float | None = None
    busy_graph_warmup_ms: float | None = None
    busy_gap_ms: float = 50.0
    rep_ms: float = 40.0
    max_repeats: int = 100
    host_reps: int = 3
    rotate_bytes: int = 100 * 2**20
    max_rotate: int = 8
    l2: str = "cold"

    def __post_init__(self) -> None:
        if not (
            self.warmup_ms >= 0
            and (self.busy_warmup_ms is None or self.busy_warmup_ms >= 0)
            and (self.busy_graph_warmup_ms is None or self.busy_graph_warmup_ms >= 0)
            and self.busy_gap_ms >= 0
            and self.rep_ms > 0
        ):
            raise ValueError(
                f"`warmup_ms`, `busy_warmup_ms`, `busy_graph_warmup_ms` and `busy_gap_ms` must be "
                f">= 0 and `rep_ms` > 0, got warmup_ms={self.warmup_ms}, "
                f"busy_warmup_ms={self.busy_warmup_ms}, "
                f"busy_graph_warmup_ms={self.busy_graph_warmup_ms}, "
                f"busy_gap_ms={self.busy_gap_ms}, rep_ms={self.rep_ms}"
            )
        if self.l2 not in ("cold", "warm"):
            raise ValueError(f"`l2` must be 'cold' or 'warm', got l2={self.l2!r}")
        if (
            self.host_reps < 1
            or self.max_rotate < 1
            or self.rotate_bytes < 0
            or self.max_repeats < 1
        ):
            raise ValueError(
                f"`host_reps` and `max_rotate` must be >= 1 and `rotate_bytes` >= 0, got "
                f"host_reps={self.host_reps}, max_rotate={self.max_rotate}, "
                f"rotate_bytes={self.rotate_bytes}"
            )

    def n_rotate(self, set_bytes: int) -> int:
        """How many input sets of `set_bytes` bytes each a round rotates through (one, warm)."""
        if self.l2 == "warm":
            return 1
        return max(1, min(self.max_rotate, math.ceil(self.rotate_bytes / max(set_bytes, 1))))

    def for_description(self, desc: Any) -> MeasurementProtocol:
        """This protocol with the description's `l2` (cold or warm)."""
        return self if desc.l2 == self.l2 else replace(self, l2=desc.l2)

    def warmup_after(self, gap_ms: float | None, *, graph: bool = False) -> float:
        """The warm-up of a round that starts `gap_ms` after this process's previous round
        ended (None: no previous round), milliseconds; `graph`: of a micro-second kernel's
        graph replays."""
        if self.busy_warmup_ms is None or gap_ms is None or gap_ms > self.busy_gap_ms:
            return self.warmup_ms
        if graph and self.busy_graph_warmup_ms is not None:
            return self.busy_graph_warmup_ms
        return self.busy_warmup_ms


DEFAULT_PROTOCOL = MeasurementProtocol()
"""The protocol of the search's trials and of every re-measurement."""

BACK_TO_BACK_PROTOCOL = MeasurementProtocol(
    rep_ms=20.0, busy_warmup_ms=2.0, busy_graph_warmup_ms=1.0
)
"""The per-GPU benchmark server's: a round right after another warms up 2 ms (a micro-second
kernel's graph replays 1 ms) and times 20 ms of launches. A matrix evaluation is a round at
every shape back to back, so each shape's warm-up and launches add up: on an H200, over the
12 shapes of `examples/kernels/triton/matmul_llm.yaml`, this protocol's evaluation took 0.28 s
of GPU against 0.42 s with 10 ms and 40 ms, its rounds' values as spread and within 0.4 % of
theirs (`bench.protocol_cost`, docs/benchmarks.md)."""


@dataclass(frozen=True)
class TimingStats:
    """Summary of one round of timings of one configuration, in milliseconds.

    Attributes:
        median_ms: Median time; the round's value (robust to outliers).
        mean_ms: Arithmetic mean.
        min_ms: Fastest repetition.
        max_ms: Slowest repetition.
        iqr_ms: Interquartile range (75th minus 25th percentile).
        cv: Coefficient of variation (standard deviation over mean, dimensionless).
        n: Number of timed repetitions.
        timer: ``"cuda_events"`` (one launch between two events), ``"cuda_graph"`` (a replay of
            many launches between two events), ``"host"`` (a wall clock, CPU only) or
            `CUT_TIMER` (one launch, or five, at or past the round's cut-off).
        sm_clock_mhz: The GPU's SM clock right after the round (None off a GPU or without NVML).
        temperature_c: The GPU's temperature right after the round, °C (likewise).
        p50_ms: 50th percentile of the repetitions (the median, under its latency name).
        p95_ms: 95th percentile: the tail a latency objective constrains.
        p99_ms: 99th percentile (meaningful with >= 100 repetitions; a round of a 0.2 ms
            kernel has ~130).
        warmup_ms: The round's warm-up (`MeasurementProtocol.warmup_after`; None on the CPU).
        launches_per_replay: Launches in each timed replay of timer ``cuda_graph`` (each
            repetition is a replay's mean per launch); None for one launch per repetition.
        l2: ``"cold"`` or ``"warm"`` (`MeasurementProtocol.l2`; None on the CPU).
    """

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    cv: float
    n: int
    timer: str
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    warmup_ms: float | None = None
    launches_per_replay: int | None = None
    l2: str | None = None

    def as_metrics(self) -> dict[str, Any]:
        """Return the statistics as a flat dict for a Ray Tune result."""
        return asdict(self)


def summarize(times_ms: Sequence[float], *, timer: str) -> TimingStats:
    """Summarise per-repetition timings.

    Args:
        times_ms: One time per repetition, in milliseconds.
        timer: Name of the clock that produced them (stored in the result).

    Returns:
        The median, spread and extremes of `times_ms`.

    Raises:
        ValueError: If `times_ms` is empty or holds a non-finite value.
    """
    arr = np.asarray(times_ms, dtype=np.float64)
    if arr.size == 0:
        raise ValueError("`times_ms` must hold at least one timing, got an empty sequence")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`times_ms` must be finite, got {arr[~np.isfinite(arr)][:3].tolist()}")
    q25, q50, q75, q95, q99 = np.percentile(arr, [25, 50, 75, 95, 99])
    mean = float(arr.mean())
    # ddof=1: sample standard deviation; a single repetition has no spread.
    std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
    return TimingStats(
        median_ms=float(q50),
        mean_ms=mean,
        min_ms=float(arr.min()),
        max_ms=float(arr.max()),
        iqr_ms=float(q75 - q25),
        cv=std / mean if mean > 0 else math.inf,
        n=int(arr.size),
        timer=timer,
        p50_ms=float(q50),
        p95_ms=float(q95),
        p99_ms=float(q99),
    )


class _Rotator:
    """Calls ``fn(i)`` with i cycling over ``range(n)`` so that each repetition reads new inputs."""

    def __init__(self, fn: Callable[[int], object], n: int) -> None:
        self._fn = fn
        self._n = n
        self._i = 0

    def __call__(self) -> None:
        self._fn(self._i)
        self._i = (self._i + 1) % self._n


SPIN_CYCLES = 100_000
"""Clock cycles of the spin that separates two warm-L2 launches (~50 µs at 2 GHz): like a
flush, it keeps the GPU busy while the host queues the next launch, so the host's launch
overhead is not timed, and it leaves L2 as it was."""


GRAPH_BELOW_MS = 0.02
"""Kernels shorter than this (ms, from launches back to back) are timed from CUDA-graph replays:
timed one launch at a time, a micro-second kernel's value would be its event resolution and
launch gaps, and its flush would cost twenty times the kernel."""
GRAPH_TRY_BELOW_MS = 0.1
"""Kernels whose flushed launch, less a flush, is under this (ms) are tried in a graph, whose
replay decides against `GRAPH_BELOW_MS`: the host's launch overhead can inflate that estimate
several times over, and the method must not flip from round to round with it."""
GRAPH_REPLAY_MS = 0.25
"""Aimed duration of one graph replay (ms): enough launches that the events' resolution
(~0.5 µs, 0.2 % of it) and the graph's own launch vanish in the mean per launch."""
GRAPH_REPLAYS = 10
"""Timed replays of a graph per round (as `triton.testing.do_bench_cudagraph`); each is the
mean of hundreds of launches, so ten give a stable median."""
MAX_GRAPH_LAUNCHES = 1000
MAX_CAPTURED_LAUNCHES = 128
"""Launches captured into one graph: a replay of more replays that graph back to back. A graph
costs host time per captured launch (each a Python launch, then instantiated), while the GPU
waits; back-to-back replays cost ~10 µs of host time each and keep the GPU busy, and the gap
between two graphs (~1-2 µs) adds at most ~1 % to a one-micro-second kernel's mean per
launch. A round captures one graph."""


CUT_FROM_MS = 0.5
"""The shortest launch a cut-off ends a round on (ms, `time_cuda`'s `cutoff_ms`). A single
launch timed after its separator includes whatever host time its launch took beyond the
separator's, which for a process's first launches of a kernel reaches tenths of a millisecond:
ten times a micro-second kernel's round. Half a millisecond is beyond such overhead, and a
shorter kernel's full round costs a few milliseconds anyway."""
CUT_TIMER = "cut_off"
"""The timer of a round that a cut-off ended after one timed launch, or after the five of its
estimate (`time_cuda`)."""


def time_cuda(
    fn: Callable[[int], object],
    *,
    n_rotate: int,
    warmup_ms: float,
    rep_ms: float,
    arrays: ArrayLibrary = TORCH,
    max_repeats: int | None = None,
    l2: str = "cold",
    graph_warmup_ms: float | None = None,
    cutoff_ms: float | None = None,
) -> TimingStats:
    """Time a GPU callable with CUDA events, the method chosen by the kernel's duration.

    Every timed launch (or replay) follows a separator that keeps the GPU busy while the host
    queues it, so that the host's launch overhead is not timed: with `l2` ``"cold"`` a zeroing
    of `FLUSH_BYTES`, which also evicts the previous launch's data from L2; ``"warm"`` a spin of
    `SPIN_CYCLES`, which leaves L2 as it was. First one untimed call, five separated calls and
    five separators alone (the kernel's time is the difference). A kernel of at least
    `GRAPH_BELOW_MS` (decided by a graph replay where that difference is under
    `GRAPH_TRY_BELOW_MS`) is timed by `triton.testing.do_bench`'s procedure, written once over
    the array library so that CuPy (CUDA C++ kernels, no torch) and torch (Triton, Helion) time
    alike: `warmup_ms` worth of untimed calls, then `rep_ms` worth of timed ones (at most
    `max_repeats`, at least 5), each between two events after its separator (timer
    ``cuda_events``). A shorter kernel is captured once into a CUDA graph of about
    `GRAPH_REPLAY_MS` of launches; a replay is that graph replayed back to back as often as
    the aimed duration takes (the estimate can be inflated by the host's launch overhead, a
    replay's time is not), for `graph_warmup_ms` untimed, then `GRAPH_REPLAYS` times between
    two events, each after its separator; a replay's value is its mean per launch (timer
    ``cuda_graph``). `fn` receives the index of the input set to use, rotating over `n_rotate`
    sets, so that cold, most launches find their inputs outside L2 when the sets together are
    larger than it.

    With `cutoff_ms`, one launch after the untimed one is timed after its separator, and a
    launch of at least `cutoff_ms` (and `CUT_FROM_MS`) ends the round there: its value is that
    launch (timer `CUT_TIMER`); else the five separated launches' kernel time, when at least
    `cutoff_ms` (and `GRAPH_TRY_BELOW_MS`: no graph kernel), ends it with that mean. A search
    or sweep of a matrix passes a multiple of the best time seen at the shape
    (`objectives.cutoffs`): a configuration already that much slower is not a winner there,
    and its full round (a warm-up and tens of launches) would be GPU time spent on nothing.

    Args:
        fn: Launches the kernel on input set ``i`` (asynchronously, on the library's current
            stream; no synchronisation inside; capturable into a graph).
        n_rotate: Number of input sets to rotate through (>= 1).
        warmup_ms: Warm-up duration, milliseconds.
        rep_ms: Total duration of the timed repetitions, milliseconds.
        arrays: The library whose stream, events, graphs and memory the kernel uses.
        max_repeats: At most this many timed launches (None: as many as `rep_ms` holds).
        l2: ``"cold"`` or ``"warm"`` (`MeasurementProtocol.l2`).
        graph_warmup_ms: Warm-up of graph replays, milliseconds (None: `warmup_ms`).
        cutoff_ms: End the round after a launch at least this long (None: never).

    Returns:
        Statistics over all timed repetitions (launches, or replays' means per launch), or
        the launches that reached `cutoff_ms` (timer `CUT_TIMER`).
    """
    if n_rotate < 1:
        raise ValueError(f"`n_rotate` must be >= 1, got n_rotate={n_rotate}")
    call = _Rotator(fn, n_rotate)
    call()
    arrays.synchronize()
    separate = _separator(l2, arrays)
    if cutoff_ms is not None:
        # After the untimed launch: its host path warm, the launch is timed, not the host.
        first_ms = _separated_times(call, separate, 1, arrays)[0]
        if first_ms >= max(cutoff_ms, CUT_FROM_MS):
            return summarize([first_ms], timer=CUT_TIMER)
    start, end = arrays.event(), arrays.event()
    start.record()
    for _ in range(5):
        separate()
        call()
    end.record()
    arrays.synchronize()
    # A floor of one event resolution (~0.5 µs), against a zero estimate.
    estimate_ms = max(arrays.elapsed_ms(start, end) / 5, 5e-4)
    start.record()
    for _ in range(5):
        separate()
    end.record()
    arrays.synchronize()
    # The kernel alone: a separated launch less a separator. Launches back to back would time
    # the host's launch overhead instead, which the separator hides.
    kernel_ms = max(estimate_ms - arrays.elapsed_ms(start, end) / 5, 5e-4)
    if cutoff_ms is not None and kernel_ms >= max(cutoff_ms, GRAPH_TRY_BELOW_MS):
        # Five separated launches back to back: the host's time hides behind the separators.
        return replace(summarize([kernel_ms], timer=CUT_TIMER), n=5)
    if kernel_ms < GRAPH_TRY_BELOW_MS:
        warm = warmup_ms if graph_warmup_ms is None else graph_warmup_ms
        graphed = _time_graph(call, separate, kernel_ms, warmup_ms=warm, arrays=arrays)
        if graphed is not None:
            return graphed
    n_warmup = max(1, int(warmup_ms / estimate_ms))
    n_repeat = max(5, int(rep_ms / estimate_ms))
    if max_repeats is not None:
        n_repeat = min(n_repeat, max(5, max_repeats))
    for _ in range(n_warmup):
        call()
    return summarize(_separated_times(call, separate, n_repeat, arrays), timer="cuda_events")


def _separator(l2: str, arrays: ArrayLibrary) -> Callable[[], None]:
    """What runs before each timed launch: an L2 flush (cold) or a spin (warm)."""
    if l2 == "warm":
        return functools.partial(arrays.spin, SPIN_CYCLES)
    if l2 != "cold":
        raise ValueError(f"`l2` must be 'cold' or 'warm', got l2={l2!r}")
    flush = arrays.empty_int32(FLUSH_BYTES // 4)
    return functools.partial(arrays.zero_, flush)


def _time_graph(
    call: Callable[[], None],
    separate: Callable[[], None],
    kernel_ms: float,
    *,
    warmup_ms: float,
    arrays: ArrayLibrary,
) -> TimingStats | None:
    """`time_cuda`'s method for a micro-second kernel: replays of a captured graph of launches.
    None when a replay shows the kernel is not one (the estimate was off): the caller times it
    launch by launch."""
    launches = max(1, min(MAX_CAPTURED_LAUNCHES, math.ceil(GRAPH_REPLAY_MS / kernel_ms)))
    graph = arrays.capture(lambda: _repeat(call, launches))
    graph()  # untimed: the first replay uploads the graph
    first, last = arrays.event(), arrays.event()
    first.record()
    graph()
    last.record()
    arrays.synchronize()
    graph_ms = max(arrays.elapsed_ms(first, last), 5e-4)
    if graph_ms / launches >= GRAPH_BELOW_MS:
        return None
    repeats = max(1, min(MAX_GRAPH_LAUNCHES // launches, math.ceil(GRAPH_REPLAY_MS / graph_ms)))
    per_replay = launches * repeats

    def replay() -> None:
        _repeat(graph, repeats)

    for _ in range(max(1, math.ceil(warmup_ms / (graph_ms * repeats)))):
        replay()
    times = [t / per_replay for t in _separated_times(replay, separate, GRAPH_REPLAYS, arrays)]
    return replace(summarize(times, timer="cuda_graph"), launches_per_replay=per_replay)


def _repeat(body: Callable[[], object], times: int) -> None:
    for _ in range(times):
        body()


def _separated_times(
    body: Callable[[], object], separate: Callable[[], None], repeats: int, arrays: ArrayLibrary
) -> list[float]:
    """`repeats` runs of `body`, each timed between two events after its separator (ms)."""
    starts = [arrays.event() for _ in range(repeats)]
    ends = [arrays.event() for _ in range(repeats)]
    for i in range(repeats):
        separate()
        starts[i].record()
        body()
        ends[i].record()
    arrays.synchronize()
    return [arrays.elapsed_ms(s, e) for s, e in zip(starts, ends, strict=True)]


def time_host(
    fn: Callable[[int], object], *, n_rotate: int, reps: int, cutoff_ms: float | None = None
) -> TimingStats:
    """Time a synchronous callable with the host clock (the CPU / interpreter path).

    Args:
        fn: Runs the kernel to completion on input set ``i``.
        n_rotate: Number of input sets to rotate through (>= 1).
        reps: Number of timed repetitions after one warm-up call (>= 1).
        cutoff_ms: A warm-up call at least this long ends the round with its time (timer
            `CUT_TIMER`), as `time_cuda`'s timed launch (None: never).

    Returns:
        Statistics over the repetitions, timer ``"host"``.
    """
    if n_rotate < 1 or reps < 1:
        raise ValueError(
            f"`n_rotate` and `reps` must be >= 1, got n_rotate={n_rotate}, reps={reps}"
        )
    call = _Rotator(fn, n_rotate)
    t0 = time.perf_counter()
    call()
    first_ms = (time.perf_counter() - t0) * 1e3
    if cutoff_ms is not None and first_ms >= max(cutoff_ms, CUT_FROM_MS):
        return summarize([first_ms], timer=CUT_TIMER)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
    return summarize(times, timer="host")


# When this process's last GPU round ended (`time.perf_counter`): a process times one GPU.
_last_round_end: float | None = None


def measure_round(
    run: Callable[[int], object],
    n_rotate: int,
    *,
    device: str,
    protocol: MeasurementProtocol = DEFAULT_PROTOCOL,
    arrays: ArrayLibrary = TORCH,
    idle_ms: float | None = None,
    cutoff_ms: float | None = None,
) -> TimingStats:
    """One round of the protocol: time `run` over `n_rotate` input sets.

    On a GPU the caller holds the GPU alone (`objectives._gpu.exclusive_gpu`), so no other
    trial's kernel runs during the round.

    Args:
        run: Launches the kernel on input set ``i`` (asynchronously on a GPU; to completion on
            the CPU).
        n_rotate: Number of input sets (`objectives._bench.timing_sets`).
        device: ``"cuda"``: CUDA events, L2 flush, clock and temperature recorded; anything
            else: the host clock (Triton's interpreter).
        protocol: The round's settings (`DEFAULT_PROTOCOL`).
        arrays: The kernel's array library (torch; CuPy for CUDA C++).
        idle_ms: How long the GPU idled before this round, from the lock the caller holds
            (`objectives._gpu.GpuLease.idle_ms`: any process's rounds count, so that workers
            sharing a GPU warm up as one); None: since this process's last round.
        cutoff_ms: End the round after a launch at least this long (`time_cuda`).

    Returns:
        The round's statistics; ``median_ms`` is its value.
    """
    global _last_round_end
    if device != "cuda":
        return time_host(run, n_rotate=n_rotate, reps=protocol.host_reps, cutoff_ms=cutoff_ms)
    gap_ms = None if _last_round_end is None else 1e3 * (time.perf_counter() - _last_round_end)
    if idle_ms is not None:
        gap_ms = idle_ms if gap_ms is None else min(gap_ms, idle_ms)
    warmup_ms = protocol.warmup_after(gap_ms)
    graph_warmup_ms = protocol.warmup_after(gap_ms, graph=True)
    stats = time_cuda(
        run,
        n_rotate=n_rotate,
        warmup_ms=warmup_ms,
        rep_ms=protocol.rep_ms,
        arrays=arrays,
        max_repeats=protocol.max_repeats,
        l2=protocol.l2,
        graph_warmup_ms=graph_warmup_ms,
        cutoff_ms=cutoff_ms,
    )
    _last_round_end = time.perf_counter()
    conditions = gpu_conditions(arrays)
    return replace(
        stats,
        sm_clock_mhz=conditions["sm_clock_mhz"],
        temperature_c=conditions["temperature_c"],
        warmup_ms={"cuda_graph": graph_warmup_ms, CUT_TIMER: 0.0}.get(stats.timer, warmup_ms),
        l2=protocol.l2,
    )
