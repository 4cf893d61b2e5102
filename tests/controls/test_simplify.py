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


def test_a_timed_winner_keeps_only_the_controls_faster_beyond_noise() -> None:
    import numpy as np

    from ciq_tune.controls.simplify import simplify_timed
    from ciq_tune.validation import ValidationConfig

    rng = np.random.default_rng(0)
    winner = {
        "params": {"BLOCK": 128},
        "controls": {"triton": {"num_warps": 8, "ptx_options/minnctapersm": 2, "maxnreg": 128}},
    }

    def time_ms(config: dict) -> float:
        # 8 warps are 10 % faster than the default; the other two controls change nothing.
        base = 0.2 / 1.10 if config["controls"]["triton"].get("num_warps") == 8 else 0.2
        return float(base * (1 + 0.005 * rng.normal()))

    result = simplify_timed(winner, time_ms, settings=ValidationConfig())
    assert result["config"] == {"params": {"BLOCK": 128}, "controls": {"triton": {"num_warps": 8}}}
    assert result["dropped"] == {"triton": {"ptx_options/minnctapersm": 2, "maxnreg": 128}}
    kept = result["kept"]["triton"]["num_warps"]
    assert kept["speedup"] == pytest.approx(1.10, rel=0.02) and kept["speedup_ci"][0] > 1.0
    assert kept["rounds"] == 10  # a clear effect decides at the first look


def test_a_matrix_buckets_winner_ships_without_the_controls_that_do_nothing() -> None:
    # One bucket's validation with a timed metric: the search's best (num_warps 4 and an inert
    # cache modifier) is 10 % faster than the baseline; only num_warps makes it so.
    import numpy as np

    from ciq_tune.controls.simplify import validate_and_simplify
    from ciq_tune.results import EvaluationRecord
    from ciq_tune.results import Objective
    from ciq_tune.results import SearchResults
    from ciq_tune.validation import ValidationConfig
    from searchers.matrix_search import _winner

    baseline = {"params": {"BLOCK": 64}, "controls": {"triton": {}}}
    best = {"params": {"BLOCK": 64}, "controls": {"triton": {"num_warps": 4, "cache": "cg"}}}
    rng = np.random.default_rng(0)

    def measure(config: dict) -> float:
        fast = config["controls"]["triton"].get("num_warps") == 4
        return float((0.9 if fast else 1.0) * rng.normal(1.0, 0.01))

    records = [
        EvaluationRecord(i, 0, config, (), str(i), "initial", "ok", {"m": value}, 0.0)
        for i, (config, value) in enumerate([(baseline, 1.0), (best, 0.9)])
    ]
    results = SearchResults([Objective(name="m", mode="min")], records)
    validation = validate_and_simplify(
        results, measure, baseline, k=1, config=ValidationConfig(repetitions=20)
    )
    assert validation.outcome == "kept"
    assert validation.simplification is not None
    assert validation.simplification["dropped"] == {"triton": {"cache": "cg"}}
    assert set(validation.simplification["kept"]["triton"]) == {"num_warps"}
    shipped = {"params": {"BLOCK": 64}, "controls": {"triton": {"num_warps": 4}}}
    assert _winner(results, validation, baseline) == shipped
