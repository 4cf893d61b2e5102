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

    def fake_time_cuda(fn, *, n_rotate, warmup_ms, rep_ms):
        warmups.append(warmup_ms)
        return protocol.summarize([1.0, 1.1], timer="cuda_events")

    monkeypatch.setattr(protocol, "time_cuda", fake_time_cuda)
    monkeypatch.setattr(
        protocol, "gpu_conditions", lambda: {"sm_clock_mhz": 1500.0, "temperature_c": 50.0}
    )
    monkeypatch.setattr(protocol, "_last_round_end", None)
    # a 5 s gap: "right after" holds on a loaded CI machine too
    p = MeasurementProtocol(warmup_ms=100.0, busy_warmup_ms=10.0, busy_gap_ms=5000.0)
    first = measure_round(lambda i: None, 1, device="cuda", protocol=p)
    second = measure_round(lambda i: None, 1, device="cuda", protocol=p)
    # the GPU idled for 10 s since this process's last round: the long warm-up again
    monkeypatch.setattr(protocol, "_last_round_end", protocol._last_round_end - 10.0)
    third = measure_round(lambda i: None, 1, device="cuda", protocol=p)
    assert warmups == [100.0, 10.0, 100.0]
    assert (first.warmup_ms, second.warmup_ms, third.warmup_ms) == (100.0, 10.0, 100.0)
    assert second.sm_clock_mhz == 1500.0


def test_warmup_after_a_gap():
    p = MeasurementProtocol(warmup_ms=100.0, busy_warmup_ms=10.0, busy_gap_ms=50.0)
    assert p.warmup_after(None) == 100.0
    assert p.warmup_after(49.0) == 10.0
    assert p.warmup_after(51.0) == 100.0
