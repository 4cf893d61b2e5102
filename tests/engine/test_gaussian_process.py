"""The Gaussian process that ranks listed short-list spaces, and `screened`'s use of it."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from scipy.optimize import check_grad
from scipy.stats import spearmanr

import ciq_tune.space as ss
from ciq_tune.engine import Budget
from ciq_tune.engine import Objective
from ciq_tune.engine import create_engine
from ciq_tune.engine import gaussian_process
from ciq_tune.engine import process_ranking
from ciq_tune.engine.gaussian_process import LENGTH_SCALES
from ciq_tune.engine.gaussian_process import GaussianProcess
from ciq_tune.engine.gaussian_process import ListedProcess
from ciq_tune.engine.gaussian_process import expected_improvement
from ciq_tune.engine.gaussian_process import hyperparameter_objective
from ciq_tune.errors import EngineError
from tests.engine.conftest import drive
from tests.engine.conftest import first_generation

# A kernel-like space: three short ordered lists and a category, 192 configurations.
SHORT = {
    "block": ss.ordinal([16, 32, 64, 128]),
    "warps": ss.ordinal([1, 2, 4, 8]),
    "stages": ss.ordinal([1, 2, 3, 4]),
    "layout": ss.choice(["row", "col", "tiled"]),
}


def _time(config: dict[str, Any]) -> float:
    layout = {"row": 0.3, "col": 0.0, "tiled": 0.6}[config["layout"]]
    return (
        1.0
        + (np.log2(config["block"]) - 6) ** 2
        + (np.log2(config["warps"]) - 2) ** 2
        + 0.5 * (config["stages"] - 3) ** 2
        + layout
    )


# Six short ordered lists (4096 configurations) and a bowl over them: a listed space where
# configurations near the best differ from far ones in how many parameters they change.
BOWL = ss.SearchSpace({f"p{i}": ss.ordinal([1, 2, 4, 8]) for i in range(6)})


def _bowl_time(config: dict[str, Any]) -> dict[str, float]:
    return {"time": sum((np.log2(v) - 1.5) ** 2 for v in config.values())}


def test_the_process_interpolates_its_evaluations_and_is_unsure_away_from_them() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((12, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    process = GaussianProcess(X, y)
    assert process.length_scale in LENGTH_SCALES
    mean, sd = process.predict(X)
    assert np.allclose(process.to_value(mean), y, atol=0.25 * y.std())
    _, far = process.predict(np.full((1, 3), 3.0))
    assert far[0] > 3 * sd.max()


def test_expected_improvement_rewards_a_low_mean_and_a_wide_spread() -> None:
    ei = expected_improvement(np.array([-1.0, 0.0, 0.0, 1.0]), np.array([0.1, 0.1, 1.0, 0.1]), 0.0)
    assert ei[0] > ei[1] and ei[2] > ei[1] and ei[1] > ei[3] >= 0


def _engine(space: Any, config: dict[str, Any], evaluations: int, seed: int = 0) -> Any:
    return create_engine(
        "screened",
        space,
        [Objective(name="time", mode="min")],
        config=config,
        budget=Budget(max_evaluations=evaluations),
        seed=seed,
    )


def test_auto_ranks_listed_short_lists_by_the_process_and_wide_spaces_by_the_ratio() -> None:
    assert _engine(SHORT, {}, 10)._ranks_by_process()
    assert not _engine({**SHORT, "split": ss.range(1, 64)}, {}, 10)._ranks_by_process()
    assert not _engine(SHORT, {"ranking": "parzen"}, 10)._ranks_by_process()


def test_a_space_too_large_to_list_is_refused_when_the_process_is_asked_for() -> None:
    huge = {f"p{i}": ss.ordinal(list(range(30))) for i in range(5)}
    engine = _engine(huge, {"ranking": "gaussian_process"}, 10)
    with pytest.raises(EngineError, match="ranking='gaussian_process' lists the space"):
        engine._ranks_by_process()
    assert not _engine(huge, {}, 10)._ranks_by_process()  # auto falls back to the ratio


@pytest.mark.parametrize("workers", [1, 3])
def test_process_picks_are_new_feasible_and_find_the_optimum_early(workers: int) -> None:
    space = ss.SearchSpace(SHORT, constraints=["block * warps <= 512"])
    found = []
    for seed in range(5):
        engine = _engine(space, {}, 60, seed)
        keys = drive(engine, lambda c: {"time": _time(c)}, workers=workers)
        assert len(keys) == len(set(keys)) == 60
        assert all(r.config["block"] * r.config["warps"] <= 512 for r in engine.records)
        times = [r.values["time"] for r in engine.records]
        found.append(int(np.argmin(times)) + 1 if min(times) == 1.0 else 61)
    # Random search needs (N + 1) / 2 draws on average for the optimum of N = 156 feasible
    # configurations; the process, a few generations.
    assert np.median(found) <= 30


def test_failures_steer_the_process_away() -> None:
    def picks_of_block_128(fails: bool) -> int:
        def timed(config: dict[str, Any]) -> Any:
            if fails and config["block"] == 128:
                return None, "compile_error"
            return {"time": _time(config)}

        picks = 0
        for seed in range(4):
            engine = _engine(SHORT, {}, 60, seed)
            drive(engine, timed)
            picks += sum(r.config["block"] == 128 for r in engine.records[20:])
        return picks

    # block 128 is one unit from the optimum's time; once it fails it is picked less.
    assert picks_of_block_128(fails=True) < 0.8 * picks_of_block_128(fails=False)


def _proposed_keys(evaluations: int, seed: int, restore_at: int | None = None) -> list[str]:
    """The keys a default search of SHORT proposes, restored from its state after `restore_at`
    proposals (None: never)."""
    engine = _engine(SHORT, {}, evaluations, seed)
    keys: list[str] = []
    while not engine.finished:
        if len(keys) == restore_at:
            engine = type(engine).from_state(engine.get_state())
        candidate = engine.ask()
        assert candidate is not None
        keys.append(candidate.key)
        engine.tell(candidate.id, {"time": _time(candidate.config)})
    return keys


def test_the_process_ranking_is_restored_from_state() -> None:
    assert _proposed_keys(40, 4, restore_at=17) == _proposed_keys(40, 4)


def test_a_search_started_from_an_earlier_one_keeps_the_ratio() -> None:
    earlier = _engine(SHORT, {}, 12, 5)
    drive(earlier, lambda c: {"time": _time(c)})
    started = create_engine(
        "screened", SHORT, [Objective(name="time", mode="min")], transfer_from=earlier.result()
    )
    assert not started._ranks_by_process()
    assert _engine(SHORT, {}, 12, 5)._ranks_by_process()


def test_a_listed_search_starts_from_a_greedy_maximin_design() -> None:
    space = ss.SearchSpace(SHORT, constraints=["block * warps <= 512"])
    for seed in range(3):
        engine = _engine(space, {}, 60, seed)
        first = first_generation(engine)
        assert len(first) == 6 and len({c.key for c in first}) == 6
        assert all(c.config["block"] * c.config["warps"] <= 512 for c in first)
        # Each point is the listed configuration farthest from the points before it.
        X = engine._process_features([c.genes for c in first])
        for k in range(1, len(first)):
            gaps = np.linalg.norm(engine._listed_X[:, None, :] - X[None, :k, :], axis=2)
            farthest = gaps.min(axis=1).max()
            assert np.isclose(np.linalg.norm(X[:k] - X[k], axis=1).min(), farthest)


def test_the_maximin_design_keeps_the_warm_start_and_a_budget_in_generations() -> None:
    start = {"block": 64, "warps": 4, "stages": 3, "layout": "col"}
    engine = create_engine(
        "screened",
        SHORT,
        [Objective(name="time", mode="min")],
        budget=Budget(max_evaluations=40),
        seed=1,
        initial_points=[start],
    )
    first = first_generation(engine)
    assert len(first) == 6 and first[0].config == start
    # The design keeps away from the warm start: the next point is the farthest from it.
    X = engine._process_features([c.genes for c in first[:2]])
    farthest = np.linalg.norm(engine._listed_X - X[0], axis=1).max()
    assert np.isclose(np.linalg.norm(X[1] - X[0]), farthest)
    by_generations = create_engine(
        "screened", SHORT, [Objective(name="time", mode="min")], budget=Budget(max_generations=5)
    )
    assert len(first_generation(by_generations)) == 4  # `pool_size`, as promised


@pytest.mark.parametrize("budget", [Budget(max_generations=1), Budget(max_evaluations=20)])
def test_a_design_larger_than_the_listed_space_evaluates_it_all_and_says_so(
    budget: Budget,
) -> None:
    space = ss.SearchSpace({"a": ss.choice(["c0", "c1", "c2"])})
    engine = create_engine(
        "screened",
        space,
        [Objective(name="time", mode="min")],
        config={"pool_size": 6},
        budget=budget,
        seed=0,
    )
    assert engine._ranks_by_process()
    keys = drive(engine, lambda config: {"time": float(config["a"][1])})
    assert len(keys) == len(set(keys)) == 3
    assert engine.stop_reason == "every feasible configuration has been evaluated"


def test_the_per_coordinate_objective_has_the_gradient_it_claims() -> None:
    rng = np.random.default_rng(1)
    X = rng.random((15, 4))
    y = np.sin(4 * X[:, 0]) + 0.3 * X[:, 2]
    y = (y - y.mean()) / y.std()
    differences = (X[:, None, :] - X[None, :, :]) ** 2
    for theta in (np.log([1, 1, 1, 1, 0.05]), np.log([0.3, 2.0, 0.7, 5.0, 0.002])):
        error = check_grad(
            lambda v: hyperparameter_objective(v, differences, y)[0],
            lambda v: hyperparameter_objective(v, differences, y)[1],
            theta,
        )
        gradient = hyperparameter_objective(theta, differences, y)[1]
        assert error < 1e-4 * (1 + np.linalg.norm(gradient))


def test_per_coordinate_scales_shrink_where_the_values_change_and_grow_where_they_do_not() -> None:
    rng = np.random.default_rng(2)
    X = rng.random((40, 3))
    y = np.sin(5 * X[:, 0]) + 0.05 * rng.standard_normal(40)  # only column 0 matters
    process = GaussianProcess(X, y, per_coordinate=True)
    scales = np.asarray(process.length_scale)
    assert scales.shape == (3,) and scales[0] < 0.5 and min(scales[1:]) > 3 * scales[0]
    # Refitting with the fitted scales and noise gives the same process (the kriging believer
    # reuses them).
    again = GaussianProcess(X, y, process.length_scale, noise=process.noise)
    assert np.allclose(again.predict(X[:5])[0], process.predict(X[:5])[0])
    # The shared scale ranks held-out points worse: column 1 and 2 blur its distances.
    test = rng.random((300, 3))
    truth = np.sin(5 * test[:, 0])
    shared = GaussianProcess(X, y)
    ranked = [spearmanr(p.predict(test)[0], truth)[0] for p in (process, shared)]
    assert ranked[0] > ranked[1]


def test_the_fitted_noise_follows_the_noise_in_the_values() -> None:
    rng = np.random.default_rng(3)
    X = rng.random((40, 2))
    smooth = np.sin(4 * X[:, 0]) + X[:, 1]
    exact = GaussianProcess(X, smooth, per_coordinate=True)
    measured = smooth + 0.2 * rng.standard_normal(40)
    noisy = GaussianProcess(X, measured, per_coordinate=True)
    # Replayed timings repeat exactly: the noise goes to its lower bound, far below the fixed
    # one, and the process interpolates; measured noise is fitted within a factor of 3 (the
    # noise variance of the standardised values is 0.2^2 / their variance).
    assert exact.noise < 0.01 * gaussian_process.NOISE
    assert np.allclose(exact.to_value(exact.predict(X)[0]), smooth, atol=0.01 * smooth.std())
    assert abs(np.log(noisy.noise / (0.2**2 / measured.var()))) < np.log(3)


@pytest.mark.parametrize("setting", ["per_parameter", "shared"])
def test_the_search_fits_the_length_scales_its_setting_names(
    setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fitted: list[GaussianProcess | ListedProcess] = []

    class Recorded(GaussianProcess):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            fitted.append(self)

    class RecordedListed(ListedProcess):  # the process that ranks the listed space
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            fitted.append(self)

    monkeypatch.setattr(process_ranking, "GaussianProcess", Recorded)
    monkeypatch.setattr(process_ranking, "ListedProcess", RecordedListed)
    engine = _engine(SHORT, {"length_scales": setting}, 30)
    drive(engine, lambda config: {"time": _time(config)})
    columns = engine._listed_X.shape[1]  # three ordered lists and a one-hot category
    assert fitted and columns == 6
    for process in fitted:
        if setting == "per_parameter":
            assert np.shape(process.length_scale) == (columns,)
        else:
            assert process.length_scale in LENGTH_SCALES


def _fitted_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of evaluations of each fit of the per-parameter scales, as they happen."""
    sizes: list[int] = []
    fit = gaussian_process.fit_hyperparameters

    def counted(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        sizes.append(len(X))
        return fit(X, y)

    monkeypatch.setattr(gaussian_process, "fit_hyperparameters", counted)
    return sizes


def test_per_parameter_scales_are_refitted_every_generation_then_as_the_evaluations_grow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fitted_at = _fitted_sizes(monkeypatch)
    uninterrupted = _proposed_keys(170, 3)
    early = [n for n in fitted_at if n <= process_ranking.SCALES_REFIT_EVERY_GENERATION]
    late = [n for n in fitted_at if n > process_ranking.SCALES_REFIT_EVERY_GENERATION]
    assert all(b - a <= 4 for a, b in itertools.pairwise(early))  # one fit per generation of 4
    assert late and all(
        b >= process_ranking.SCALES_REFIT_GROWTH * a
        for a, b in itertools.pairwise([early[-1], *late])
    )
    # The scales and noise in use are part of the engine's state: a restored search proposes
    # the same.
    assert _proposed_keys(170, 3, restore_at=130) == uninterrupted


def _changes_from_the_best(local_picks: int) -> list[int]:
    """How many parameters of the best configuration each of a generation's four process picks
    changes, after 16 evaluations of a six-parameter bowl."""
    engine = _engine(BOWL, {"local_picks": local_picks}, 16)
    drive(engine, _bowl_time)
    best = engine._split()[0][0].genes
    picks = engine._expected_improvement_picks(4)
    return [sum(a != b for a, b in zip(p.genes, best, strict=True)) for p in picks]


def test_the_last_picks_of_a_generation_stay_near_the_best() -> None:
    assert max(_changes_from_the_best(0)) > process_ranking.LOCAL_CHANGES
    assert max(_changes_from_the_best(1)[-1:]) <= process_ranking.LOCAL_CHANGES
    assert max(_changes_from_the_best(4)) <= process_ranking.LOCAL_CHANGES


def test_a_steady_state_search_picks_near_the_best_only_at_the_generational_share() -> None:
    engine = _engine(BOWL, {"steady_state": True}, 60)
    drive(engine, _bowl_time)
    records = engine.records
    local = []
    for i in range(engine.config.listed_initial_points, len(records)):
        best = min(records[:i], key=lambda r: r.values["time"]).genes
        changes = sum(a != b for a, b in zip(records[i].genes, best, strict=True))
        local.append(changes <= process_ranking.LOCAL_CHANGES)
    # One pick at a time, each local with probability 1/4 (plus whole-space picks that
    # happen to land near the best), not every one.
    assert 0 < sum(local) < len(local)


def _listed_case(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Listed rows, which of them were evaluated (in order), their values, which failed."""
    rng = np.random.default_rng(seed)
    Z = rng.random((300, 4))
    told = rng.permutation(300)[:40]
    values = np.sin(3 * Z[told, 0]) + Z[told, 1] ** 2
    failed = rng.random(40) < 0.2
    return Z, told, values, failed


def _update(process: ListedProcess, Z: np.ndarray, told: np.ndarray, values: np.ndarray,
            failed: np.ndarray, batch: int) -> np.ndarray:  # fmt: skip
    """`ListedProcess.update` with these evaluations; returns `GaussianProcess`'s `y`."""
    ok = values[~failed]
    y = np.concatenate([ok, np.full(int(failed.sum()), ok.max())])
    keys = [str(i) for i in told]
    process.update(keys, lambda i, j: (Z[told[i:j]], list(told[i:j])), values, failed, y, batch)
    return y


def test_the_listed_process_predicts_what_the_process_does() -> None:
    Z, told, values, failed = _listed_case(0)
    scales = np.array([0.4, 0.7, 1.5, 3.0])
    listed = ListedProcess(Z, scales, 1e-3)
    y = _update(listed, Z, told, values, failed, batch=25)
    X = np.vstack([Z[told[~failed]], Z[told[failed]]])  # `GaussianProcess`'s order
    process = GaussianProcess(X, y, scales, noise=1e-3)
    rows = np.arange(300)

    def agree() -> None:
        mean, sd = listed.predict(rows)
        want_mean, want_sd = process.predict(Z)
        assert np.allclose(mean, want_mean, rtol=0, atol=1e-9)
        assert np.allclose(sd, want_sd, rtol=0, atol=1e-9)
        assert listed.best == pytest.approx(process.best, abs=1e-12)

    agree()
    B = Z[[3, 5]]  # two configurations out for evaluation, then picks one after another
    listed.believe_all(["b3", "b5"], B, listed.predict_points(B), [3, 5])
    process = process.believing(B, process.predict(B)[0])
    agree()
    near = np.arange(100, 160)
    for row, cols in ((7, None), (120, near), (130, near), (11, None)):
        mean = process.predict(Z[row : row + 1])[0]
        listed.believe(f"p{row}", Z[row : row + 1], mean, row, cols)
        process = process.believing(Z[row : row + 1], mean)
        if cols is not None:  # kept up to date near the best only, until asked elsewhere
            assert np.allclose(listed.predict(near)[0], process.predict(Z[near])[0], atol=1e-9)
    agree()  # the picks believed near the best only are believed everywhere again


def test_the_listed_process_is_the_same_numbers_however_its_evaluations_arrived() -> None:
    Z, told, values, failed = _listed_case(1)
    scales = np.array([0.5, 0.5, 1.0, 2.0])
    stepwise = ListedProcess(Z, scales, 1e-2)
    for n in (20, 26, 31, 40):  # each update after believing the next evaluations
        y = _update(stepwise, Z, told[:n], values[:n], failed[:n], batch=20)
        for i in told[n : n + 3]:
            stepwise.believe(str(i), Z[i : i + 1], stepwise.predict(np.array([i]))[0], int(i))
    y = _update(stepwise, Z, told, values, failed, batch=20)
    at_once = ListedProcess(Z, scales, 1e-2)
    assert np.array_equal(_update(at_once, Z, told, values, failed, batch=20), y)
    rows = np.arange(300)
    for a, b in zip(stepwise.predict(rows), at_once.predict(rows), strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("workers", [1, 3])
def test_the_listed_ranking_proposes_what_the_rebuilt_process_proposes(
    workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = ss.SearchSpace(SHORT, constraints=["block * warps <= 512"])

    def timed(config: dict[str, Any]) -> Any:
        if config["stages"] == 4 and config["warps"] == 8:
            return None, "compile_error"
        return {"time": _time(config)}

    def proposed(seed: int) -> list[str]:
        return drive(_engine(space, {}, 70, seed), timed, workers=workers)

    fast = [proposed(seed) for seed in range(3)]
    # Every pick by `GaussianProcess` rebuilt for it, as before `ListedProcess`.
    monkeypatch.setattr(process_ranking, "_near_tie", lambda gain, pick: True)
    assert [proposed(seed) for seed in range(3)] == fast


def test_per_parameter_scales_are_not_refitted_after_the_last_refit_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fitted_at = _fitted_sizes(monkeypatch)
    monkeypatch.setattr(process_ranking, "SCALES_REFIT_UNTIL", 110)
    _proposed_keys(170, 3)
    # The growth schedule alone refits at ~125 and ~156 (the test above).
    assert fitted_at and max(fitted_at) <= 110


def test_the_process_is_fitted_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from threadpoolctl import threadpool_info

    threads: list[int] = []
    fit = gaussian_process.fit_hyperparameters

    def recorded(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        threads.extend(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")
        return fit(X, y)

    monkeypatch.setattr(gaussian_process, "fit_hyperparameters", recorded)
    _proposed_keys(40, 3)
    assert threads and set(threads) == {1}
