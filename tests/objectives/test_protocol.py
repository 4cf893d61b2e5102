"""Tests of the measurement protocol: settings, rounds on the host clock, shared input sets."""

from __future__ import annotations

import pytest

from objectives.protocol import DEFAULT_PROTOCOL
from objectives.protocol import MeasurementProtocol
from objectives.protocol import measure_round


def test_defaults_are_the_search_settings():
    assert DEFAULT_PROTOCOL.warmup_ms == 100.0 and DEFAULT_PROTOCOL.rep_ms == 40.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rep_ms": 0},
        {"warmup_ms": -1},
        {"busy_warmup_ms": -1},
        {"busy_gap_ms": -1},
        {"host_reps": 0},
        {"max_rotate": 0},
    ],
)
def test_bad_settings_are_refused_with_their_name(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        MeasurementProtocol(**kwargs)


def test_rotation_covers_the_bytes_up_to_the_cap():
    p = MeasurementProtocol(rotate_bytes=100, max_rotate=8)
    assert p.n_rotate(60) == 2
    assert p.n_rotate(1) == 8
    assert p.n_rotate(1000) == 1


def test_a_host_round_times_host_reps_calls_over_rotating_sets():
    seen: list[int] = []
    stats = measure_round(seen.append, 3, device="cpu", protocol=MeasurementProtocol(host_reps=4))
    # one untimed warm-up call, then host_reps timed ones, cycling over the 3 sets
    assert seen == [0, 1, 2, 0, 1]
    assert stats.n == 4 and stats.timer == "host"
    assert stats.sm_clock_mhz is None and stats.temperature_c is None


def test_a_gpu_round_warms_up_long_after_idle_and_short_right_after_a_round(monkeypatch):
    import objectives.protocol as protocol

    warmups: list[float] = []

    def fake_time_cuda(fn, *, n_rotate, warmup_ms, rep_ms, arrays, max_repeats, l2, **graph):
        warmups.append(warmup_ms)
        return protocol.summarize([1.0, 1.1], timer="cuda_events")

    monkeypatch.setattr(protocol, "time_cuda", fake_time_cuda)
    monkeypatch.setattr(
        protocol,
        "gpu_conditions",
        lambda arrays: {"sm_clock_mhz": 1500.0, "temperature_c": 50.0},
    )
    monkeypatch.setattr(protocol, "_last_round_end", None)
    # a 5 s gap: "right after" holds on a loaded CI machine too
    p = MeasurementProtocol(warmup_ms=100.0, busy_warmup_ms=10.0, busy_gap_ms=5000.0)
    first = measure_round(lambda i: None, 1, device="cuda", protocol=p)
    second = measure_round(lambda i: None, 1, device="cuda", protocol=p)
    # the GPU idled for 10 s since this process's last round: the long warm-up again
    monkeypatch.setattr(protocol, "_last_round_end", protocol._last_round_end - 10.0)
    third = measure_round(lambda i: None, 1, device="cuda", protocol=p)
    # this process idled 10 s, but another worker on the GPU timed a round a moment ago (the
    # GPU's lock says so): the short warm-up
    monkeypatch.setattr(protocol, "_last_round_end", protocol._last_round_end - 10.0)
    fourth = measure_round(lambda i: None, 1, device="cuda", protocol=p, idle_ms=3.0)
    assert warmups == [100.0, 10.0, 100.0, 10.0]
    assert (first.warmup_ms, second.warmup_ms, third.warmup_ms) == (100.0, 10.0, 100.0)
    assert second.sm_clock_mhz == 1500.0 and fourth.warmup_ms == 10.0


def test_warmup_after_a_gap():
    p = MeasurementProtocol(warmup_ms=100.0, busy_warmup_ms=10.0, busy_gap_ms=50.0)
    assert p.warmup_after(None) == 100.0
    assert p.warmup_after(49.0) == 10.0
    assert p.warmup_after(51.0) == 100.0


def test_only_the_back_to_back_protocol_shortens_the_warmup():
    from objectives.protocol import BACK_TO_BACK_PROTOCOL

    # re-measurements and in-trial searches always warm up in full
    assert DEFAULT_PROTOCOL.warmup_after(1.0) == DEFAULT_PROTOCOL.warmup_ms == 100.0
    assert DEFAULT_PROTOCOL.warmup_after(1.0, graph=True) == 100.0
    assert BACK_TO_BACK_PROTOCOL.warmup_after(1.0) == 2.0
    assert BACK_TO_BACK_PROTOCOL.warmup_after(None) == 100.0
    # a micro-second kernel's graph replays, right after a round: 1 ms; after idling: in full
    assert BACK_TO_BACK_PROTOCOL.warmup_after(1.0, graph=True) == 1.0
    assert BACK_TO_BACK_PROTOCOL.warmup_after(None, graph=True) == 100.0


def test_a_busy_graph_round_warms_up_as_the_protocol_says_and_records_it(monkeypatch):
    import objectives.protocol as protocol

    seen: list[tuple[float, float | None]] = []

    def fake_time_cuda(fn, *, n_rotate, warmup_ms, rep_ms, arrays, max_repeats, l2, **graph):
        seen.append((warmup_ms, graph["graph_warmup_ms"]))
        return protocol.summarize([0.002, 0.002], timer="cuda_graph")

    monkeypatch.setattr(protocol, "time_cuda", fake_time_cuda)
    monkeypatch.setattr(
        protocol, "gpu_conditions", lambda arrays: {"sm_clock_mhz": None, "temperature_c": None}
    )
    monkeypatch.setattr(protocol, "_last_round_end", None)
    p = MeasurementProtocol(busy_warmup_ms=10.0, busy_graph_warmup_ms=1.0, busy_gap_ms=5000.0)
    first = measure_round(lambda i: None, 1, device="cuda", protocol=p)
    second = measure_round(lambda i: None, 1, device="cuda", protocol=p)
    assert seen == [(100.0, 100.0), (10.0, 1.0)]
    assert (first.warmup_ms, second.warmup_ms) == (100.0, 1.0)


class _TracedGpu:
    """An array library whose events read a clock that each launch advances by `launch_ms`
    (2 ms), and which records the order of flushes, event records, launches and
    synchronisations."""

    name = "traced"

    def __init__(self, launch_ms: float = 2.0) -> None:
        self.clock = 0.0
        self.launch_ms = launch_ms
        self.trace: list[object] = []

    def launch(self, i: int) -> None:
        self.trace.append(i)
        self.clock += self.launch_ms

    def advance(self, ms: float) -> None:
        self.trace.append("replay")
        self.clock += ms

    def synchronize(self, index: int | None = None) -> None:
        self.trace.append("sync")

    def event(self) -> object:
        gpu = self

        class Event:
            t = 0.0

            def record(self) -> None:
                self.t = gpu.clock
                gpu.trace.append("record")

        return Event()

    def elapsed_ms(self, start, end) -> float:
        return end.t - start.t

    def empty_int32(self, n: int) -> object:
        self.trace.append(("alloc", n * 4))
        return object()

    def zero_(self, buffer) -> None:
        self.trace.append("flush")

    def spin(self, cycles: int) -> None:
        self.trace.append(("spin", cycles))


def test_cuda_round_estimates_then_warms_up_and_times_flushed_launches():
    from objectives.protocol import FLUSH_BYTES
    from objectives.protocol import time_cuda

    gpu = _TracedGpu()
    stats = time_cuda(gpu.launch, n_rotate=3, warmup_ms=10, rep_ms=20, arrays=gpu)
    # 2 ms per launch: 10 ms of warm-up is 5 launches, 20 ms of timing is 10.
    assert stats.timer == "cuda_events" and stats.n == 10 and stats.median_ms == 2.0
    launches = [x for x in gpu.trace if isinstance(x, int)]
    assert launches == [i % 3 for i in range(1 + 5 + 5 + 10)]  # rotating over the sets
    assert gpu.trace[:3] == [0, "sync", ("alloc", FLUSH_BYTES)]
    flushed = ["flush", 1, "flush", 2, "flush", 0, "flush", 1, "flush", 2]
    assert gpu.trace[3:16] == ["record", *flushed, "record", "sync"]  # a flushed launch
    assert gpu.trace[16:24] == ["record", *["flush"] * 5, "record", "sync"]  # flushes alone
    timed = gpu.trace[-(10 * 4 + 1) :]
    assert timed[:4] == ["flush", "record", timed[2], "record"] and timed[-1] == "sync"
    assert timed.count("flush") == 10 and timed.count("record") == 20


def test_cuda_round_caps_its_launches_at_max_repeats():
    from objectives.protocol import time_cuda

    gpu = _TracedGpu()
    stats = time_cuda(gpu.launch, n_rotate=1, warmup_ms=2, rep_ms=200, arrays=gpu, max_repeats=7)
    assert stats.n == 7 and stats.timer == "cuda_events"


def test_a_launch_at_its_cut_off_ends_the_round_and_one_under_it_does_not():
    from objectives.protocol import CUT_TIMER
    from objectives.protocol import time_cuda

    gpu = _TracedGpu()  # 2 ms a launch
    cut = time_cuda(gpu.launch, n_rotate=3, warmup_ms=10, rep_ms=20, arrays=gpu, cutoff_ms=1.5)
    assert cut.timer == CUT_TIMER and cut.n == 1 and cut.median_ms == 2.0
    # the untimed launch, then one timed after its flush
    assert gpu.trace[3:] == ["flush", "record", 1, "record", "sync"]
    gpu = _TracedGpu()
    full = time_cuda(gpu.launch, n_rotate=3, warmup_ms=10, rep_ms=20, arrays=gpu, cutoff_ms=2.5)
    assert full.timer == "cuda_events" and full.n == 10
    # one launch more than a round without a cut-off
    assert [x for x in gpu.trace if isinstance(x, int)] == [i % 3 for i in range(2 + 5 + 5 + 10)]


def test_a_mid_length_kernel_is_cut_off_on_its_five_separated_launches():
    from objectives.protocol import CUT_TIMER
    from objectives.protocol import time_cuda

    gpu = _TracedGpu(launch_ms=0.3)  # under CUT_FROM_MS, over GRAPH_TRY_BELOW_MS
    stats = time_cuda(gpu.launch, n_rotate=2, warmup_ms=10, rep_ms=40, arrays=gpu, cutoff_ms=0.2)
    assert stats.timer == CUT_TIMER and stats.n == 5
    assert stats.median_ms == pytest.approx(0.3)
    # the untimed launch, the one timed, the five of the estimate: no warm-up, no repetitions
    assert sum(isinstance(x, int) for x in gpu.trace) == 1 + 1 + 5
    gpu = _TracedGpu(launch_ms=0.3)
    full = time_cuda(gpu.launch, n_rotate=2, warmup_ms=10, rep_ms=40, arrays=gpu, cutoff_ms=0.7)
    assert full.timer == "cuda_events" and full.n == int(40 / 0.3)  # the full round


def test_a_cut_off_never_ends_the_round_of_a_kernel_shorter_than_cut_from_ms():
    from objectives.protocol import CUT_FROM_MS
    from objectives.protocol import GRAPH_TRY_BELOW_MS
    from objectives.protocol import time_cuda

    gpu = _TracedGpu(launch_ms=GRAPH_TRY_BELOW_MS / 2)  # one launch could be mostly host time
    gpu.capture = lambda body: lambda: gpu.advance(50.0)  # timed launch by launch, as a test
    stats = time_cuda(gpu.launch, n_rotate=1, warmup_ms=1, rep_ms=2, arrays=gpu, cutoff_ms=0.001)
    assert stats.timer == "cuda_events" and stats.n > 1
    assert CUT_FROM_MS > GRAPH_TRY_BELOW_MS


def test_a_host_round_ends_at_its_cut_off_too():
    import time as clock

    from objectives.protocol import CUT_TIMER
    from objectives.protocol import time_host

    calls: list[int] = []

    def slow(i: int) -> None:
        calls.append(i)
        clock.sleep(0.002)

    stats = time_host(slow, n_rotate=2, reps=5, cutoff_ms=1.0)
    assert stats.timer == CUT_TIMER and stats.n == 1 and stats.median_ms >= 2.0
    assert calls == [0]
    assert time_host(slow, n_rotate=2, reps=5, cutoff_ms=1e4).n == 5


def test_a_micro_second_kernel_is_timed_from_graph_replays():
    from objectives.protocol import GRAPH_REPLAYS
    from objectives.protocol import time_cuda

    gpu = _TracedGpu(launch_ms=0.002)  # 2 µs: under GRAPH_BELOW_MS
    captured: list[int] = []

    def capture(body):
        before = len(gpu.trace)
        body()
        captured.append(sum(isinstance(x, int) for x in gpu.trace[before:]))
        return lambda: gpu.advance(captured[0] * gpu.launch_ms)

    gpu.capture = capture
    stats = time_cuda(gpu.launch, n_rotate=2, warmup_ms=10, rep_ms=40, arrays=gpu)
    # about GRAPH_REPLAY_MS of launches per replay (a graph of 125), each replay's value its
    # mean per launch
    assert captured == [125]
    assert stats.timer == "cuda_graph" and stats.launches_per_replay == 125
    assert stats.n == GRAPH_REPLAYS and stats.median_ms == pytest.approx(0.002)


def test_a_graph_shorter_than_its_estimate_is_replayed_back_to_back_never_captured_again():
    from objectives.protocol import MAX_CAPTURED_LAUNCHES
    from objectives.protocol import time_cuda

    gpu = _TracedGpu(launch_ms=0.004)  # the separated launches say 4 µs …
    captured: list[int] = []

    def capture(body):
        before = len(gpu.trace)
        body()
        captured.append(sum(isinstance(x, int) for x in gpu.trace[before:]))
        return lambda: gpu.advance(captured[0] * 0.0005)  # … a replay says 0.5 µs a launch

    gpu.capture = capture
    stats = time_cuda(gpu.launch, n_rotate=1, warmup_ms=1, rep_ms=40, arrays=gpu)
    # 63 launches aimed at 0.25 ms took 0.0315 ms: the one graph, 8 times a replay
    assert captured == [63] and MAX_CAPTURED_LAUNCHES >= 63
    assert stats.launches_per_replay == 63 * 8
    assert stats.median_ms == pytest.approx(0.0005)


def test_a_kernel_whose_graph_replay_shows_it_is_not_micro_seconds_is_timed_launch_by_launch():
    from objectives.protocol import time_cuda

    gpu = _TracedGpu(launch_ms=0.002)  # the estimate says 2 µs …
    gpu.capture = lambda body: lambda: gpu.advance(50.0)  # … a replay says otherwise
    stats = time_cuda(gpu.launch, n_rotate=2, warmup_ms=10, rep_ms=40, arrays=gpu)
    assert stats.timer == "cuda_events" and stats.launches_per_replay is None


def test_a_warm_round_separates_its_launches_by_a_spin_and_reads_one_input_set():
    """`l2: warm`: no flush buffer and no flush (L2 keeps what the kernel read), a spin before
    each timed launch instead (the host's launch overhead stays hidden), one input set."""
    from objectives.protocol import SPIN_CYCLES
    from objectives.protocol import MeasurementProtocol
    from objectives.protocol import time_cuda

    gpu = _TracedGpu()
    stats = time_cuda(gpu.launch, n_rotate=1, warmup_ms=10, rep_ms=20, arrays=gpu, l2="warm")
    assert stats.timer == "cuda_events" and stats.n == 10 and stats.median_ms == 2.0
    assert "flush" not in gpu.trace and not any(
        isinstance(x, tuple) and x[0] == "alloc" for x in gpu.trace
    )
    timed = gpu.trace[-(10 * 4 + 1) :]
    assert timed[:4] == [("spin", SPIN_CYCLES), "record", 0, "record"]
    assert MeasurementProtocol(l2="warm").n_rotate(1024) == 1
    assert MeasurementProtocol().n_rotate(1024) == 8
    with pytest.raises(ValueError, match="`l2`"):
        MeasurementProtocol(l2="hot")
