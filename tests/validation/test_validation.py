"""Validation statistics: verdicts on synthetic timings with a known effect, edges, top-k, CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats

from ciq_tune.cli import main as cli_main
from ciq_tune.errors import MeasurementError
from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.validation import VALIDATION_DEFAULTS
from ciq_tune.validation import ValidationConfig
from ciq_tune.validation import compare_samples
from ciq_tune.validation import load_timings
from ciq_tune.validation import measure_interleaved
from ciq_tune.validation import validate
from ciq_tune.validation import validate_each
from ciq_tune.validation import validate_top_k

# Relative spread of repeated H100 measurements of a Triton matmul (docs/validation.md).
CV = 0.025


def timer(rng: np.random.Generator, ms: float) -> Callable[[], float]:
    return lambda: float(ms * (1 + CV * rng.normal()))


@pytest.mark.parametrize("seed", range(5))
def test_noise_only_speedup_is_rejected(seed: int) -> None:
    rng = np.random.default_rng(seed)
    result = validate(timer(rng, 0.2), timer(rng, 0.2))
    assert result.verdict == "REJECTED"
    assert result.measurement == "interleaved"
    assert result.baseline.n == result.candidate.n <= VALIDATION_DEFAULTS["repetitions"]


@pytest.mark.parametrize("seed", range(5))
def test_real_three_percent_speedup_is_kept(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    result = validate(timer(rng, 0.2), timer(rng, 0.2 / 1.03))
    assert result.verdict == "KEPT", result.reason
    assert result.speedup_ci_low > 1.0
    assert result.p_value < 0.05
    assert result.cohens_d > 0.5  # true d = 0.03 / 0.025 = 1.2


def test_looks_are_evenly_spaced_and_at_least_ten_rounds_apart() -> None:
    assert ValidationConfig().look_rounds() == [10, 20, 30, 40, 50]
    assert ValidationConfig(repetitions=25).look_rounds() == [13, 25]
    assert ValidationConfig(repetitions=9).look_rounds() == [9]
    assert ValidationConfig(looks=1).look_rounds() == [50]


def test_a_clear_decision_stops_at_the_first_look() -> None:
    rng = np.random.default_rng(7)
    faster = validate(timer(rng, 0.2), timer(rng, 0.2 / 1.10))
    assert faster.verdict == "KEPT" and faster.baseline.n == faster.candidate.n == 10
    slower = validate(timer(rng, 0.2), timer(rng, 0.2 * 1.10))
    assert slower.verdict == "REJECTED" and slower.baseline.n == 10
    assert slower.speedup_ci_high < 1.0
    # One look: every round is taken whatever the evidence.
    once = validate(timer(rng, 0.2), timer(rng, 0.2 / 1.10), config=ValidationConfig(looks=1))
    assert once.verdict == "KEPT" and once.baseline.n == 50


def test_a_candidate_that_cannot_be_a_percent_faster_stops_at_the_first_look() -> None:
    # Quiet rounds (CV 0.3 %, as a micro-second kernel's medians on an H200): after 10 rounds
    # the interval of an identical candidate lies below 1.01, so more rounds cannot make it
    # worth shipping; without the futility margin it runs all 50.
    def quiet(rng: np.random.Generator) -> Callable[[], float]:
        return lambda: float(0.074 * (1 + 0.003 * rng.normal()))

    rng = np.random.default_rng(3)
    futile = validate(quiet(rng), quiet(rng))
    assert futile.verdict == "REJECTED" and futile.baseline.n == 10
    assert futile.speedup_ci_high < 1.01
    rng = np.random.default_rng(3)
    patient = validate(quiet(rng), quiet(rng), config=ValidationConfig(futility_margin=0))
    assert patient.verdict == "REJECTED" and patient.baseline.n == 50
    # A real 3 % speedup in the same noise is not stopped by it.
    rng = np.random.default_rng(3)
    assert validate(quiet(rng), lambda: 0.074 / 1.03 * (1 + 0.003 * rng.normal())).kept


def test_looking_five_times_keeps_the_false_accept_rate_below_alpha() -> None:
    # Noise only, 400 comparisons: each look tests at alpha / 5, so the rate over all looks
    # stays below alpha = 5 % (the union bound); one test per look at alpha would not.
    config = ValidationConfig(n_bootstrap=500)
    kept = 0
    for seed in range(400):
        rng = np.random.default_rng(10_000 + seed)
        kept += validate(timer(rng, 0.2), timer(rng, 0.2), config=config).kept
    assert kept / 400 < 0.05


def test_bootstrap_interval_covers_the_true_speedup() -> None:
    # A 95 % interval should hold the true ratio in about 95 % of repeated experiments.
    covered = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        b = 0.2 * (1 + CV * rng.normal(size=30))
        c = 0.2 / 1.03 * (1 + CV * rng.normal(size=30))
        result = compare_samples(b, c, config=ValidationConfig(n_bootstrap=1000))
        covered += result.speedup_ci_low < 1.03 < result.speedup_ci_high
    assert 88 <= covered <= 100


def test_slower_candidate_is_rejected_with_negative_effect() -> None:
    rng = np.random.default_rng(7)
    result = validate(timer(rng, 0.2), timer(rng, 0.2 * 1.05))
    assert result.verdict == "REJECTED"
    assert "worse" in result.reason
    assert result.speedup < 1
    assert result.cohens_d < 0


def test_independent_samples_use_mann_whitney_and_the_ratio_of_medians() -> None:
    b = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03]
    c = [0.95, 0.96, 0.94, 0.97, 0.95, 0.96]
    result = compare_samples(b, c)
    assert result.test == "mann_whitney"
    assert result.p_value == pytest.approx(stats.mannwhitneyu(b, c).pvalue)
    spread = np.sqrt((np.var(b, ddof=1) + np.var(c, ddof=1)) / 2)
    assert result.cohens_d == pytest.approx((np.mean(b) - np.mean(c)) / spread)
    assert result.speedup == pytest.approx(np.median(b) / np.median(c))
    assert result.measurement == "samples"


def test_interleaved_rounds_are_pairs_with_wilcoxon_on_log_ratios() -> None:
    rng = np.random.default_rng(4)
    drift = np.linspace(1.0, 1.2, 30)  # both sides slow down together over the rounds
    b = 0.2 * drift * (1 + 0.005 * rng.normal(size=30))
    c = 0.2 / 1.02 * drift * (1 + 0.005 * rng.normal(size=30))
    paired = compare_samples(b, c, measurement="interleaved")
    gains = np.log(b) - np.log(c)
    assert paired.test == "wilcoxon"
    assert paired.p_value == pytest.approx(stats.wilcoxon(gains).pvalue)
    assert paired.cohens_d == pytest.approx(np.mean(gains) / np.std(gains, ddof=1))
    assert paired.speedup == pytest.approx(np.median(b) / np.median(c))
    assert paired.kept, paired.reason
    # As independent samples the shared drift swamps the 2 % difference.
    assert not compare_samples(b, c).kept
    width = paired.speedup_ci_high - paired.speedup_ci_low
    unpaired = compare_samples(b, c)
    assert width < unpaired.speedup_ci_high - unpaired.speedup_ci_low


def test_interleaved_samples_of_different_lengths_are_refused() -> None:
    with pytest.raises(MeasurementError, match="pairs of rounds"):
        compare_samples([1.0, 1.1, 1.2, 1.3], [1.0, 1.1, 1.2], measurement="interleaved")


def test_identical_rounds_are_not_significant() -> None:
    result = compare_samples([1.0, 1.1, 1.2], [1.0, 1.1, 1.2], measurement="interleaved")
    assert result.p_value == 1.0 and result.cohens_d == 0.0 and not result.kept


def test_bonferroni_correction_divides_alpha_and_widens_the_interval() -> None:
    corrected = ValidationConfig().corrected(4)
    assert corrected.alpha == pytest.approx(0.0125)
    assert corrected.confidence == pytest.approx(1 - 0.05 / 4)
    with pytest.raises(ValueError, match="comparisons=0"):
        ValidationConfig().corrected(0)


def test_max_mode_throughput() -> None:
    # Throughput: higher is better, so the candidate at 103 beats the baseline at 100.
    rng = np.random.default_rng(3)
    b = 100 * (1 + CV * rng.normal(size=30))
    c = 103 * (1 + CV * rng.normal(size=30))
    result = compare_samples(b, c, config=ValidationConfig(mode="max"))
    assert result.speedup == pytest.approx(np.median(c) / np.median(b))
    assert result.kept
    assert result.cohens_d > 0
    swapped = compare_samples(c, b, config=ValidationConfig(mode="max"))
    assert not swapped.kept


def test_min_speedup_threshold_rejects_a_small_real_gain() -> None:
    rng = np.random.default_rng(11)
    b, c = 1 + 0.005 * rng.normal(size=30), 1 / 1.03 + 0.005 * rng.normal(size=30)
    assert compare_samples(b, c).kept
    strict = compare_samples(b, c, config=ValidationConfig(min_speedup=1.05))
    assert not strict.kept
    assert "min_speedup=1.05" in strict.reason


def test_bootstrap_is_seeded() -> None:
    rng = np.random.default_rng(0)
    b, c = rng.normal(1, 0.02, 20), rng.normal(0.98, 0.02, 20)
    first, again = compare_samples(b, c), compare_samples(b, c)
    other = compare_samples(b, c, config=ValidationConfig(seed=1))
    assert first.speedup_ci_low == again.speedup_ci_low
    assert first.speedup_ci_low != other.speedup_ci_low


def test_interleaving_order_and_warmup() -> None:
    calls: list[str] = []

    def side(name: str) -> Callable[[], float]:
        def run() -> float:
            calls.append(name)
            return float(len(calls))

        return run

    b, c = measure_interleaved([side("A"), side("B")], warmup=2, repetitions=3)
    # warm-up AB AB, then timed rounds whose order flips: AB, BA, AB
    assert "".join(calls) == "ABAB" + "AB" + "BA" + "AB"
    assert b == [5.0, 8.0, 9.0]  # the warm-up calls (1–4) are not kept
    assert c == [6.0, 7.0, 10.0]


def test_three_sides_rotate_within_rounds() -> None:
    calls: list[str] = []

    def side(name: str) -> Callable[[], float]:
        return lambda: float(calls.append(name) or len(calls))

    measure_interleaved([side("A"), side("B"), side("C")], warmup=0, repetitions=3)
    assert "".join(calls) == "ABC" + "BCA" + "CAB"


def test_candidates_share_the_baseline_rounds_and_leave_once_decided() -> None:
    rng = np.random.default_rng(7)
    calls = {"base": 0, "fast": 0, "same": 0}

    def counted(name: str, ms: float) -> Callable[[], float]:
        run = timer(rng, ms)

        def round_() -> float:
            calls[name] += 1
            return run()

        return round_

    config = ValidationConfig(warmup=2).corrected(2)
    fast, same = validate_each(
        counted("base", 0.2), [counted("fast", 0.2 / 1.5), counted("same", 0.2)], config=config
    )
    assert not isinstance(fast, MeasurementError) and not isinstance(same, MeasurementError)
    # A 1.5x speedup decides at the first look (10 rounds); the noise-only candidate runs on,
    # and the baseline runs once per round, not once per candidate.
    assert fast.kept and fast.candidate.n == 10
    assert not same.kept and same.candidate.n > 10
    assert calls["fast"] == 2 + 10
    assert calls["base"] == calls["same"] == 2 + same.candidate.n
    assert same.baseline.n == same.candidate.n


def test_a_failing_candidate_leaves_the_others_measured() -> None:
    rng = np.random.default_rng(3)
    tries = {"n": 0}

    def breaks_on_third_round() -> float:
        tries["n"] += 1
        if tries["n"] == 3:
            raise MeasurementError("wrong result at round 3")
        return 0.1

    broken, fast = validate_each(
        timer(rng, 0.2), [breaks_on_third_round, timer(rng, 0.1)], config=ValidationConfig()
    )
    assert isinstance(broken, MeasurementError) and "round 3" in str(broken)
    assert tries["n"] == 3  # not called again once it failed
    assert not isinstance(fast, MeasurementError) and fast.kept
    with pytest.raises(MeasurementError, match="round 3"):
        tries["n"] = 0
        validate(timer(rng, 0.2), breaks_on_third_round)


def test_a_failing_baseline_fails_every_candidate() -> None:
    def broken() -> float:
        raise MeasurementError("baseline crashed")

    rng = np.random.default_rng(4)
    out = validate_each(broken, [timer(rng, 0.1), timer(rng, 0.2)])
    assert [str(e) for e in out] == ["baseline crashed", "baseline crashed"]


def test_interleaving_cancels_drift_that_fools_a_sequential_measurement() -> None:
    # Clocks ramp up: every run is 0.1 % faster than the one before; the two sides are equal.
    clock = {"t": 0}

    def run() -> float:
        clock["t"] += 1
        return 1.0 * (1 - 0.001 * clock["t"])

    sequential_b = [run() for _ in range(30)]
    sequential_c = [run() for _ in range(30)]
    assert compare_samples(sequential_b, sequential_c).kept  # the drift looks like a speedup
    clock["t"] = 0
    assert not validate(run, run, config=ValidationConfig(warmup=0)).kept


def test_zero_variance_samples_are_json_safe() -> None:
    result = compare_samples([1.0] * 5, [0.9] * 5)
    assert result.cohens_d == float("inf")
    data = result.to_dict()
    assert data["cohens_d"] == "inf"
    json.dumps(data)


@pytest.mark.parametrize(
    ("values", "fragment"),
    [([1.0, 2.0], "at least 3"), ([1.0, float("nan"), 2.0], "finite positive"), ([1, 0, 2], "0")],
)
def test_unusable_samples_name_the_argument(values: list[float], fragment: str) -> None:
    with pytest.raises(MeasurementError, match="`candidate`") as info:
        compare_samples([1.0, 1.1, 1.2], values)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [{"repetitions": 4}, {"alpha": 0.0}, {"confidence": 1.0}, {"n_bootstrap": 10}, {"x": 1}],
)
def test_config_rejects_bad_values(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError, match=next(iter(bad))):
        ValidationConfig(**bad)


def _record(cid: int, ms: float) -> EvaluationRecord:
    return EvaluationRecord(
        candidate_id=cid,
        generation=0,
        config={"BM": 32 * cid},
        genes=(cid,),
        key=str(cid),
        origin="sampled",
        status="ok",
        values={"time_ms": ms},
        elapsed_s=0.1,
    )


def test_top_k_remeasures_the_best_with_bonferroni() -> None:
    # The search saw candidate 2 as best (a lucky 0.19), but only candidate 3 is really faster.
    records = [_record(1, 0.21), _record(2, 0.19), _record(3, 0.195), _record(4, 0.25)]
    results = SearchResults([Objective(name="time_ms")], records)
    true_ms = {1: 0.2, 2: 0.2, 3: 0.2 / 1.04, 4: 0.25}
    rng = np.random.default_rng(5)
    out = validate_top_k(
        results, lambda r: timer(rng, true_ms[r.candidate_id]), timer(rng, 0.2), k=3
    )
    assert [v.candidate_id for v in out] == [2, 3, 1]
    assert [v.rank for v in out] == [1, 2, 3]
    assert [v.result.verdict for v in out] == ["REJECTED", "KEPT", "REJECTED"]
    assert out[0].search_values == {"time_ms": 0.19}
    # Bonferroni over the 3 candidates, then over each comparison's 5 looks.
    assert out[1].result.config.alpha == pytest.approx(0.05 / 3 / 5)
    assert out[1].result.config.confidence == pytest.approx(1 - 0.05 / 3 / 5)
    assert out[1].to_dict()["candidate_id"] == 3


def test_top_k_rejects_bad_k_and_empty_results() -> None:
    results = SearchResults([Objective(name="time_ms")], [_record(1, 0.2)])
    with pytest.raises(MeasurementError, match="k=0"):
        validate_top_k(results, lambda r: lambda: 1.0, lambda: 1.0, k=0)
    with pytest.raises(MeasurementError, match="no successful"):
        validate_top_k(
            SearchResults([Objective(name="time_ms")], []), lambda r: lambda: 1.0, lambda: 1.0
        )


def test_load_timings_formats(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("[1, 2.5, 3]")
    (tmp_path / "b.json").write_text('{"times_ms": [4, 5, 6]}')
    (tmp_path / "c.txt").write_text("# ms\n1.0, 2.0\n3.0  # last\n")
    assert load_timings(tmp_path / "a.json") == [1.0, 2.5, 3.0]
    assert load_timings(tmp_path / "b.json") == [4.0, 5.0, 6.0]
    assert load_timings(tmp_path / "c.txt") == [1.0, 2.0, 3.0]
    (tmp_path / "d.txt").write_text("1.0 fast 2.0")
    with pytest.raises(MeasurementError, match="fast"):
        load_timings(tmp_path / "d.txt")
    with pytest.raises(MeasurementError, match="cannot read"):
        load_timings(tmp_path / "missing.txt")


def test_validate_command_exit_status_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(2)
    base, fast, same = tmp_path / "b.txt", tmp_path / "f.txt", tmp_path / "s.txt"
    base.write_text("\n".join(map(str, 0.2 * (1 + CV * rng.normal(size=30)))))
    fast.write_text("\n".join(map(str, 0.2 / 1.03 * (1 + CV * rng.normal(size=30)))))
    same.write_text("\n".join(map(str, 0.2 * (1 + CV * rng.normal(size=30)))))
    assert cli_main(["validate", str(base), str(fast)]) == 0
    assert capsys.readouterr().out.startswith("KEPT: ")
    assert cli_main(["validate", str(base), str(same), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "REJECTED"


def test_a_round_counter_counts_each_call_and_its_seconds_failed_ones_too() -> None:
    import time

    from ciq_tune.validation import RoundCounter

    counter = RoundCounter()

    def slow(config: int) -> float:
        time.sleep(0.01)
        if config < 0:
            raise ValueError("broken")
        return float(config)

    run = counter.counted(slow)
    assert run(2) == 2.0 and run(3) == 3.0
    with pytest.raises(ValueError, match="broken"):
        run(-1)
    assert counter.rounds == 3 and 0.03 <= counter.seconds < 1.0
    assert counter.summary(2.0).startswith("3 rounds in 0.0 s of the 2.0 s")
