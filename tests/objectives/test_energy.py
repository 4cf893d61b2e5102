"""Energy per call from NVML's counter: on a fake counter (CPU) and on a real GPU."""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from objectives import _nvml

WATTS = 200.0


class _FakeArrays:
    """The parts of an array library `measure_energy` uses."""

    name = "fake"

    def current_device(self) -> int:
        return 0

    def pci_bus_id(self, index: int) -> str:
        return "0000:00:00.0"

    def synchronize(self) -> None:
        pass


def _fake_nvml() -> types.ModuleType:
    """A pynvml whose energy counter (mJ) grows at `WATTS` from its first reading."""
    started = time.perf_counter()
    module = types.ModuleType("pynvml")
    module.nvmlInit = lambda: None  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByPciBusId = lambda bus: "handle"  # type: ignore[attr-defined]
    module.nvmlDeviceGetTotalEnergyConsumption = (  # type: ignore[attr-defined]
        lambda handle: int(1e3 * WATTS * (time.perf_counter() - started))
    )
    return module


def test_energy_per_call_is_the_counters_rise_over_the_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml())
    monkeypatch.setattr(_nvml, "_HANDLES", {})
    calls: list[int] = []
    measured = _nvml.measure_energy(calls.append, n_rotate=3, min_s=0.2, arrays=_FakeArrays())  # type: ignore[arg-type]
    assert measured["power_w"] == pytest.approx(WATTS, rel=0.05)
    # Every call ran back to back, rotating over the input sets, for at least min_s.
    assert len(calls) % 16 == 0 and set(calls) == {0, 1, 2}
    assert measured["energy_mj"] == pytest.approx(measured["power_w"] * 0.2e3 / len(calls), rel=0.3)


def test_no_counter_is_no_energy_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = _fake_nvml()

    def refuse(handle: Any) -> int:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    broken.nvmlDeviceGetTotalEnergyConsumption = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    monkeypatch.setattr(_nvml, "_HANDLES", {})
    assert _nvml.measure_energy(lambda i: None, n_rotate=1, arrays=_FakeArrays()) == {}  # type: ignore[arg-type]


@pytest.mark.gpu
def test_a_trial_measures_energy_when_it_is_the_metric(tmp_path: Path) -> None:
    from objectives import load_description
    from objectives import make_trainable
    from tests.objectives.data.row_scale_description import row_scale_description

    path = row_scale_description(tmp_path, sizes={"rows": 4096, "n_cols": 4096}, metric="energy_mj")
    result = make_trainable(load_description(path))({"params": {"BLOCK": 64}, "controls": {}})
    assert result["status"] == "ok", result
    assert result["energy_mj"] > 0 and 1 < result["power_w"] < 2000, result
