"""Tests of the measurement protocol: settings, rounds on the host clock, shared input sets."""

from __future__ import annotations

import pytest

from objectives.protocol import DEFAULT_PROTOCOL
from objectives.protocol import MeasurementProtocol
from objectives.protocol import measure_round


def test_defaults_are_the_search_settings():
    assert DEFAULT_PROTOCOL.warmup_ms == 100.0 and DEFAULT_PROTOCOL.rep_ms == 40.0


@pytest.mark.parametrize(
    "kwargs", [{"rep_ms": 0}, {"warmup_ms": -1}, {"host_reps": 0}, {"max_rotate": 0}]
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
