"""`make_measure`: one fresh evaluation of a configuration's metric, for re-measurement."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ciq_tune.errors import MeasurementError
from objectives import load_description
from objectives import make_measure
from objectives import measurement_is_exact

EXAMPLE = Path(__file__).parents[2] / "examples/kernels/ptx/spill.yaml"
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")


def _timed_copy(tmp_path: Path) -> Path:
    text = EXAMPLE.read_text().replace("metric: spill_bytes", "metric: compile_time_s")
    path = tmp_path / "spill.yaml"
    path.write_text(text.replace("source: spill.ptx", f"source: {EXAMPLE.parent}/spill.ptx"))
    return path


def test_only_ptx_compile_statistics_are_exact(tmp_path: Path) -> None:
    assert measurement_is_exact(load_description(EXAMPLE))
    assert not measurement_is_exact(load_description(_timed_copy(tmp_path)))


@needs_ptxas
def test_ptx_measure_compiles_afresh_and_returns_the_metric(tmp_path: Path) -> None:
    measure = make_measure(load_description(_timed_copy(tmp_path)))
    times = [measure({"controls": {"ptxas": {}}}) for _ in range(3)]
    # No compile cache: every call is a new ptxas run with its own (positive) time.
    assert all(t > 0 for t in times) and len(set(times)) == 3
    spill = make_measure(load_description(EXAMPLE))
    lean = {"controls": {"ptxas": {"register_usage_level": 0}}}
    assert spill(lean) == spill(lean) < spill({"controls": {"ptxas": {}}})


@needs_ptxas
def test_a_failed_run_raises_with_its_status() -> None:
    measure = make_measure(load_description(EXAMPLE))
    with pytest.raises(MeasurementError, match="invalid_control"):
        measure({"controls": {"ptxas": {"opt_level": "1 -o /etc/passwd"}}})
