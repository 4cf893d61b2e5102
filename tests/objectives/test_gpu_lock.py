"""The per-GPU benchmark lock: one holder at a time, waits measured and reported, released when
its holder dies."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from objectives import _gpu
from objectives._gpu import UtilizationSampler
from objectives._gpu import held_lock


def test_holders_take_turns_and_the_wait_is_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(_gpu, "HEARTBEAT_S", 0.05)
    path = tmp_path / "gpu.lock"
    spans: list[tuple[float, float]] = []
    taken = threading.Event()

    def first() -> None:
        with held_lock(path):
            taken.set()
            start = time.perf_counter()
            time.sleep(0.4)
            spans.append((start, time.perf_counter()))

    thread = threading.Thread(target=first)
    thread.start()
    taken.wait(5)
    beats: list[str] = []
    with held_lock(path, heartbeat=beats.append) as lease:
        start = time.perf_counter()
        time.sleep(0.05)
        spans.append((start, time.perf_counter()))
    thread.join()
    first_span, second_span = sorted(spans)
    assert first_span[1] <= second_span[0], "the second holder ran while the first held it"
    assert 0.25 < lease.wait_s < 5
    assert 0.04 < lease.held_s < 1
    # Told every 50 ms while waiting ~0.35 s, so that the worker's run deadline restarts.
    assert len(beats) >= 3 and set(beats) == {"waiting for the GPU"}


def test_an_uncontended_lock_is_not_waited_for(tmp_path):
    beats: list[str] = []
    with held_lock(tmp_path / "gpu.lock", heartbeat=beats.append) as lease:
        pass
    assert lease.wait_s < 0.1 and beats == []


def test_a_killed_holder_releases_the_lock(tmp_path):
    path = tmp_path / "gpu.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import time
                from objectives._gpu import held_lock
                with held_lock(__import__("pathlib").Path({str(path)!r})):
                    print("held", flush=True)
                    time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        holder.kill()
        holder.wait(10)
        with held_lock(path) as lease:
            pass
        assert lease.wait_s < 2
    finally:
        holder.kill()
        holder.wait(10)


def test_utilization_sampler_without_nvml_says_why():
    pytest.importorskip("torch")
    with UtilizationSampler(period_s=0.01) as sampler:
        time.sleep(0.05)
    summary = sampler.summary()
    # On a machine with NVML and a GPU the samples are there; elsewhere the reason is.
    assert summary["available"] == bool(summary["gpus"])
    assert summary["available"] or summary["error"]


def test_utilization_sampler_summarises_a_window_of_its_samples(monkeypatch):
    import types

    busy = {"pct": 0.0, "mhz": 1980, "mw": 100_000}

    def no_power(handle: object) -> float:
        raise RuntimeError("not supported")

    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=b"00000000:C1:00.0"),
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=busy["pct"]),
        NVML_CLOCK_SM=1,
        nvmlDeviceGetClockInfo=lambda h, kind: busy["mhz"],
        nvmlDeviceGetPowerUsage=lambda h: busy["mw"],
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with UtilizationSampler(period_s=0.01) as sampler:
        time.sleep(0.2)
        busy.update(pct=100.0, mhz=1700, mw=700_000)
        since = time.time()
        time.sleep(0.2)
        fake.nvmlDeviceGetPowerUsage = no_power
        after = time.time()
        time.sleep(0.1)
    whole = sampler.summary()["gpus"]["00000000:c1:00.0"]
    window = sampler.summary(since=since + 0.02, until=after)["gpus"]["00000000:c1:00.0"]
    assert window["mean_pct"] == 100.0 and window["samples"] < whole["samples"]
    assert window["mean_sm_clock_mhz"] == 1700 and window["mean_power_w"] == 700.0
    assert 0 < whole["mean_pct"] < 100 and 1700 < whole["mean_sm_clock_mhz"] < 1980
    # a reading NVML cannot give is left out of the mean, not counted as zero
    last = sampler.summary(since=after + 0.02)["gpus"]["00000000:c1:00.0"]
    assert last["mean_power_w"] is None and last["mean_sm_clock_mhz"] == 1700


def test_utilization_sampler_rejects_a_bad_period():
    with pytest.raises(ValueError, match="period_s=0"):
        UtilizationSampler(period_s=0)
