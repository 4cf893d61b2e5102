"""simplify_controls: the winner keeps only the controls that change its metric."""

from __future__ import annotations

import pytest

from ciq_tune.controls.simplify import simplify_controls
from ciq_tune.errors import MeasurementError

WINNER = {
    "controls": {
        "ptxas": {"opt_level": 1, "maxrregcount": 40, "def_store_cache": "wt", "fmad": False}
    },
    "params": {"BM": 64},
}


def spill_bytes(config: dict) -> float:
    # Only opt_level changes the spill; the other controls are inert.
    return 1116.0 if config["controls"]["ptxas"].get("opt_level") == 1 else 2052.0


def test_exact_metric_keeps_only_the_control_that_matters() -> None:
    calls = []

    def measure(config: dict) -> float:
        calls.append(config)
        return spill_bytes(config)

    simplified, dropped = simplify_controls(WINNER, 1116.0, measure, mode="min")
    assert simplified == {"controls": {"ptxas": {"opt_level": 1}}, "params": {"BM": 64}}
    assert dropped == {"ptxas": {"maxrregcount": 40, "def_store_cache": "wt", "fmad": False}}
    assert len(calls) == 4  # one fresh measurement per control
    assert WINNER["controls"]["ptxas"]["maxrregcount"] == 40  # the input is not modified


def test_tolerance_and_failures_keep_controls() -> None:
    def noisy(config: dict) -> float:
        ptxas = config["controls"]["ptxas"]
        if "fmad" not in ptxas:
            raise MeasurementError("compile_error")
        return 100.0 if "maxrregcount" in ptxas else 103.0  # 3 % slower without it

    kept, dropped = simplify_controls(WINNER, 100.0, noisy, mode="min", rel_tolerance=0.025)
    assert set(kept["controls"]["ptxas"]) == {"maxrregcount", "fmad"}
    assert set(dropped["ptxas"]) == {"opt_level", "def_store_cache"}
    loose, _ = simplify_controls(WINNER, 100.0, noisy, mode="min", rel_tolerance=0.05)
    assert set(loose["controls"]["ptxas"]) == {"fmad"}
    with pytest.raises(ValueError, match="mode"):
        simplify_controls(WINNER, 1.0, noisy, mode="down")
