"""simplify_controls and simplify_timed: the winner keeps only the controls and parameter values
that change its metric."""

from __future__ import annotations

import shutil
from pathlib import Path

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


def test_a_timed_winner_resets_the_parameters_not_faster_beyond_noise() -> None:
    # Only BLOCK_M = 128 is faster (10 %); BLOCK_N, SPLIT_K (absent from the baseline) and the
    # control change nothing but the noise. GROUP_M is the baseline's and is not judged.
    import numpy as np

    from ciq_tune.controls.simplify import simplify_timed
    from ciq_tune.validation import ValidationConfig

    rng = np.random.default_rng(1)
    baseline = {"params": {"BLOCK_M": 64, "BLOCK_N": 64, "GROUP_M": 8}, "controls": {"triton": {}}}
    winner = {
        "params": {"BLOCK_M": 128, "BLOCK_N": 128, "GROUP_M": 8, "SPLIT_K": 2},
        "controls": {"triton": {"maxnreg": 128}},
    }
    judged = []

    def time_ms(config: dict) -> float:
        judged.append(config)
        base = 0.2 / 1.10 if config["params"]["BLOCK_M"] == 128 else 0.2
        return float(base * (1 + 0.005 * rng.normal()))

    result = simplify_timed(winner, time_ms, settings=ValidationConfig(), baseline=baseline)
    assert result["config"] == {
        "params": {"BLOCK_M": 128, "BLOCK_N": 64, "GROUP_M": 8},
        "controls": {"triton": {}},
    }
    assert result["dropped"] == {
        "triton": {"maxnreg": 128},
        "params": {"BLOCK_N": 128, "SPLIT_K": 2},
    }
    assert set(result["kept"]) == {"params"} and set(result["kept"]["params"]) == {"BLOCK_M"}
    kept = result["kept"]["params"]["BLOCK_M"]
    assert kept["speedup"] == pytest.approx(1.10, rel=0.02) and kept["speedup_ci"][0] > 1.0
    assert kept["rounds"] == 10 and "p=" in kept["reason"]
    # Controls first: the control is judged with the winner's parameters.
    assert judged[0]["params"] == winner["params"]
    assert winner["params"]["BLOCK_N"] == 128  # the input is not modified


def test_a_parameter_whose_reset_fails_is_kept_with_the_reason() -> None:
    # BLOCK_M = 64 with BLOCK_N = 128 does not compile; BLOCK_N alone changes nothing.
    import numpy as np

    from ciq_tune.controls.simplify import simplify_timed
    from ciq_tune.validation import ValidationConfig

    rng = np.random.default_rng(2)
    baseline = {"params": {"BLOCK_M": 64, "BLOCK_N": 64}, "controls": {}}
    winner = {"params": {"BLOCK_M": 128, "BLOCK_N": 128}, "controls": {}}

    def time_ms(config: dict) -> float:
        if config["params"] == {"BLOCK_M": 64, "BLOCK_N": 128}:
            raise MeasurementError("compile_error: out of resources: shared memory")
        return float(0.2 * (1 + 0.005 * rng.normal()))

    result = simplify_timed(winner, time_ms, settings=ValidationConfig(), baseline=baseline)
    assert result["config"] == {"params": {"BLOCK_M": 128, "BLOCK_N": 64}, "controls": {}}
    assert result["dropped"] == {"params": {"BLOCK_N": 128}}
    assert result["kept"] == {
        "params": {
            "BLOCK_M": {
                "reason": "the re-measurement without it failed: "
                "compile_error: out of resources: shared memory"
            }
        }
    }
    # Without a baseline only controls are judged (nothing here).
    alone = simplify_timed(winner, time_ms, settings=ValidationConfig())
    assert alone == {"config": winner, "dropped": {}, "kept": {}}


def test_changed_params_are_those_unlike_the_baseline() -> None:
    from ciq_tune.controls.simplify import changed_params

    config = {"params": {"A": 1, "B": 2, "C": None}}
    assert changed_params(config, {"params": {"A": 1, "B": 3, "D": 4}}) == ["B", "C", "D"]
    assert changed_params(config, {"params": {"A": 1, "B": 2, "C": None}}) == []
    assert changed_params(config, None) == []


def test_a_winner_unlike_the_baseline_only_in_parameters_is_simplified_when_asked() -> None:
    # The search's best differs from the baseline in two tiles; only BLOCK makes it faster.
    import numpy as np

    from ciq_tune.controls.simplify import validate_and_simplify
    from ciq_tune.results import EvaluationRecord
    from ciq_tune.results import Objective
    from ciq_tune.results import SearchResults
    from ciq_tune.validation import ValidationConfig

    baseline = {"params": {"BLOCK": 64, "WARPS": 4}, "controls": {"triton": {}}}
    best = {"params": {"BLOCK": 128, "WARPS": 8}, "controls": {"triton": {}}}
    rng = np.random.default_rng(3)

    def measure(config: dict) -> float:
        fast = config["params"]["BLOCK"] == 128
        return float((0.9 if fast else 1.0) * rng.normal(1.0, 0.01))

    records = [
        EvaluationRecord(i, 0, config, (), str(i), "initial", "ok", {"m": value}, 0.0)
        for i, (config, value) in enumerate([(baseline, 1.0), (best, 0.9)])
    ]
    results = SearchResults([Objective(name="m", mode="min")], records)
    # By default parameters are the search's choice: nothing to judge, no comparisons.
    calls = []

    def counted(config: dict) -> float:
        calls.append(config)
        return measure(config)

    plain = validate_and_simplify(
        results, counted, baseline, k=1, config=ValidationConfig(repetitions=20)
    )
    assert plain.outcome == "kept" and plain.simplification is None
    assert best["params"] == plain.winner.config["params"] and len(calls) <= 2 * (20 + 5)
    asked = ValidationConfig(repetitions=20, simplify_params=True)
    validation = validate_and_simplify(results, measure, baseline, k=1, config=asked)
    assert validation.outcome == "kept" and validation.simplification is not None
    simplified = validation.simplification
    assert simplified["config"] == {
        "params": {"BLOCK": 128, "WARPS": 4},
        "controls": {"triton": {}},
    }
    assert simplified["dropped"] == {"params": {"WARPS": 8}}
    assert set(simplified["kept"]["params"]) == {"BLOCK"}
    assert validation.to_dict()["simplification"]["dropped"] == {"params": {"WARPS": 8}}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_tune_writes_and_prints_the_reset_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The shipped file has the reset parameter's baseline value; its controls stay controls.
    import numpy as np
    import yaml

    from ciq_tune.controls.simplify import validate_and_simplify
    from ciq_tune.results import EvaluationRecord
    from ciq_tune.results import Objective
    from ciq_tune.results import SearchResults
    from ciq_tune.validation import ValidationConfig
    from objectives import load_description
    from searchers.run.outputs import write_outputs

    desc = load_description(Path(__file__).parents[2] / "examples/kernels/cuda/saxpy.yaml")
    baseline = {"params": {"BLOCK": 256, "ITEMS": 1}, "controls": {"nvcc": {}}}
    best = {"params": {"BLOCK": 512, "ITEMS": 4}, "controls": {"nvcc": {"maxrregcount": 32}}}
    rng = np.random.default_rng(4)

    def measure(config: dict) -> float:  # only ITEMS = 4 is faster
        return float((0.9 if config["params"]["ITEMS"] == 4 else 1.0) * rng.normal(1.0, 0.01))

    records = [
        EvaluationRecord(i, 0, config, (), str(i), "initial", "ok", {"time_ms": value}, 0.0)
        for i, (config, value) in enumerate([(baseline, 1.0), (best, 0.9)])
    ]
    results = SearchResults([Objective(name="time_ms", mode="min")], records)
    asked = ValidationConfig(repetitions=20, simplify_params=True)
    validation = validate_and_simplify(results, measure, baseline, k=1, config=asked)
    assert write_outputs(tmp_path, desc, results, None, [baseline, best], validation) == 0
    data = yaml.safe_load((tmp_path / "saxpy.controls.yaml").read_text())
    assert data["params"] == {"BLOCK": 256, "ITEMS": 4} and data["controls"] == {"nvcc": {}}
    assert data["dropped_controls"] == {"nvcc": {"maxrregcount": 32}}
    simplification = data["validation"]["simplification"]
    assert simplification["dropped"] == {"nvcc": {"maxrregcount": 32}, "params": {"BLOCK": 512}}
    assert simplification["kept"]["params"]["ITEMS"]["speedup_ci"][0] > 1.0
    assert (
        "simplified: dropped 1 control(s) and reset 1 parameter(s) to the baseline's value that "
        "a paired re-measurement showed not faster beyond noise (nvcc.maxrregcount, BLOCK)"
    ) in capsys.readouterr().out


def test_losses_that_add_up_beyond_noise_leave_the_winner_unsimplified() -> None:
    """Each control alone is worth 1.5 %, below the 2 % a speedup must show to count, so each
    is dropped in turn; the three together are worth 4.6 %, which the check of the simplified
    configuration against the winner shows, and the winner ships as it is."""
    import numpy as np

    from ciq_tune.controls.simplify import simplify_timed
    from ciq_tune.validation import ValidationConfig

    rng = np.random.default_rng(0)
    winner = {"controls": {"ptxas": {"a": 1, "b": 1, "c": 1}}, "params": {}}

    def measure(config: dict) -> float:
        missing = 3 - len(config["controls"]["ptxas"])
        return 1.015**missing * rng.normal(1.0, 0.002)

    settings = ValidationConfig(min_speedup=1.02, repetitions=20, warmup=0)
    simplified = simplify_timed(winner, measure, settings=settings)
    assert simplified["check"]["verdict"] == "KEPT"
    assert simplified["check"]["speedup"] > 1.04
    assert simplified["config"] == winner and simplified["dropped"] == {}
    # Alone, one such control is dropped and the check agrees.
    single = {"controls": {"ptxas": {"a": 1}}, "params": {}}
    alone = simplify_timed(
        single,
        lambda c: 1.015 ** (1 - len(c["controls"]["ptxas"])) * rng.normal(1.0, 0.002),
        settings=settings,
    )
    assert alone["config"] == {"controls": {"ptxas": {}}, "params": {}}
    assert alone["check"]["verdict"] == "REJECTED"


def test_a_set_of_ptx_options_is_judged_option_by_option() -> None:
    """Triton's ``ptx_options`` is one control holding several ptxas options: only the option
    that matters stays, and a set left empty goes with its last option."""
    import numpy as np

    from ciq_tune.controls.simplify import simplify_timed
    from ciq_tune.validation import ValidationConfig

    rng = np.random.default_rng(1)
    options = {"minnctapersm": 2, "def_load_cache": "ca", "register_usage_level": 10}
    winner = {"controls": {"triton": {"ptx_options": options}}, "params": {"W": 4}}

    def measure(config: dict) -> float:
        chosen = config["controls"]["triton"].get("ptx_options", {})
        return (1.0 if "minnctapersm" in chosen else 1.1) * rng.normal(1.0, 0.01)

    settings = ValidationConfig(repetitions=20, warmup=0)
    simplified = simplify_timed(winner, measure, settings=settings)
    assert simplified["config"]["controls"] == {"triton": {"ptx_options": {"minnctapersm": 2}}}
    assert simplified["dropped"] == {
        "triton": {"ptx_options.def_load_cache": "ca", "ptx_options.register_usage_level": 10}
    }
    assert set(simplified["kept"]["triton"]) == {"ptx_options.minnctapersm"}
    assert simplified["check"]["verdict"] == "REJECTED"
    # None of them matters: the set goes.
    inert = simplify_timed(winner, lambda c: rng.normal(1.0, 0.01), settings=settings)
    assert inert["config"]["controls"] == {"triton": {}}
