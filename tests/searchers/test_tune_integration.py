"""CompileIQSearcher inside real Ray Tune runs on 2 CPUs."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from ray import tune
from ray.tune.schedulers import ASHAScheduler

from ciq_tune import CompileIQSearcher
from searchers import results_from_result_grid
from tests.engine.conftest import TOY_SPACE

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]


def _run(trainable, searcher, tmp_path: Path, name: str, **tune_kwargs) -> tune.ResultGrid:
    run_kwargs = tune_kwargs.pop("run_kwargs", {})
    # One Ray worker per trial slot instead of one per trial: a worker takes ~2 s to start on
    # 2 cores, longer than these trials run.
    tune_kwargs.setdefault("reuse_actors", True)
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=-1, **tune_kwargs),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=name, verbose=0, **run_kwargs),
    )
    return tuner.fit()


def toy_trainable(config):
    return {"score": config["x"] ** 2 + config["y"]}


def test_single_objective_run_finishes_on_budget(tmp_path: Path) -> None:
    searcher = CompileIQSearcher(
        space=TOY_SPACE, metric="score", mode="min", max_evaluations=40, seed=0
    )
    grid = _run(toy_trainable, searcher, tmp_path, "single")
    assert len(grid) == 40
    assert len(searcher.results()) == 40
    best_tune = grid.get_best_result(metric="score", mode="min").metrics["score"]
    assert searcher.results().best(1)[0].values["score"] == best_tune
    from_grid = results_from_result_grid(grid, "score", "min")
    assert len(from_grid) == 40
    assert from_grid.best_config == searcher.results().best_config
    table = from_grid.table()
    assert len(table) == 40 and {"score", "config/x", "config/y"} <= set(table.columns)


def test_multi_objective_run_with_param_space_domains(tmp_path: Path) -> None:
    def two(config):
        return {"time": config["a"] + 0.1 * config["b"], "energy": 10 - config["a"]}

    searcher = CompileIQSearcher(
        metric=["time", "energy"], mode=["min", "min"], generations=2, pool_size=8, seed=1
    )
    tuner = tune.Tuner(
        two,
        param_space={"a": tune.randint(0, 10), "b": tune.choice([1, 2, 3]), "const": "k"},
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=-1, reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="multi", verbose=0),
    )
    grid = tuner.fit()
    assert len(grid) == 16
    assert all(r.config["const"] == "k" for r in grid)
    results = searcher.results()
    front = results.pareto_front()
    assert front
    for f in front:  # no evaluated point is at least as good in both and better in one
        fv = (f.values["time"], f.values["energy"])
        for r in results.ok_records:
            rv = (r.values["time"], r.values["energy"])
            assert not (rv[0] <= fv[0] and rv[1] <= fv[1] and rv != fv)


def test_errors_in_trainables_are_failures_not_crashes(tmp_path: Path) -> None:
    def flaky(config):
        if config["y"] == 3:
            raise RuntimeError("kernel crashed")
        return {"score": config["x"] ** 2 + config["y"]}

    searcher = CompileIQSearcher(
        space=TOY_SPACE, metric="score", mode="min", max_evaluations=24, seed=2
    )
    grid = _run(flaky, searcher, tmp_path, "errors")
    assert len(grid) == 24
    records = searcher.results().records
    assert {r.status for r in records if r.config["y"] == 3} <= {"error"}
    assert all(r.ok for r in records if r.config["y"] != 3)
    assert len(grid.errors) == sum(r.status == "error" for r in records)
    from_grid = results_from_result_grid(grid, "score", "min")
    assert sorted(r.status for r in from_grid.records) == sorted(r.status for r in records)


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals (start, end) open at one time."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def partnered_trainable(marker: Path):
    """A trial that waits up to 10 s for a second one to be running, then reports its
    (start, end) wall times: trials overlap whenever the searcher lets two run at once, however
    slowly the 2-core machine starts workers, and one running alone takes 10 s."""

    def trainable(config):
        start = time.time()
        path = marker / f"{os.getpid()}-{time.time_ns()}"
        path.touch()
        deadline = time.monotonic() + 10.0
        while len(list(marker.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        path.unlink()
        return {"score": config["x"], "start": start, "end": time.time()}

    return trainable


@pytest.mark.parametrize("limit", [1, 2])
def test_max_concurrent_trials_is_the_most_trials_overlapping(tmp_path: Path, limit: int) -> None:
    # The searcher enforces the limit itself (`set_max_concurrency` returns True, so Tune's
    # ConcurrencyLimiter does not): with limit 1 nothing else stops a second trial.
    marker = tmp_path / "running"
    marker.mkdir()
    searcher = CompileIQSearcher(
        space=TOY_SPACE, metric="score", mode="min", max_evaluations=4, seed=3
    )
    grid = _run(
        partnered_trainable(marker), searcher, tmp_path, "limit", max_concurrent_trials=limit
    )
    assert len(grid) == 4 and not grid.errors
    assert _max_overlap([(r.metrics["start"], r.metrics["end"]) for r in grid]) == limit


def test_result_without_the_metric_is_a_failed_evaluation_and_no_switch_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tune reads the switch in the driver, this process, at each result.
    monkeypatch.delenv("TUNE_DISABLE_STRICT_METRIC_CHECKING", raising=False)

    def failing(config):
        if config["y"] == 3:
            return {"status": "compile_error", "error": "ptxas failed"}
        return {"score": config["x"] ** 2 + config["y"]}

    searcher = CompileIQSearcher(
        space=TOY_SPACE, metric="score", mode="min", max_evaluations=12, seed=2
    )
    grid = _run(failing, searcher, tmp_path, "nometric")
    assert len(grid) == 12
    records = searcher.results().records
    assert {r.status for r in records if r.config["y"] == 3} == {"compile_error"}
    assert "TUNE_DISABLE_STRICT_METRIC_CHECKING" not in os.environ


def test_space_alone_with_metric_in_tune_config_names_the_fix(tmp_path: Path) -> None:
    searcher = CompileIQSearcher(space=TOY_SPACE, seed=0)
    tuner = tune.Tuner(
        toy_trainable,
        tune_config=tune.TuneConfig(search_alg=searcher, metric="score", mode="min", num_samples=4),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="alone", verbose=0),
    )
    with pytest.raises(Exception, match=r"pass metric= and mode= to CompileIQSearcher"):
        tuner.fit()


def test_asha_early_stopping(tmp_path: Path) -> None:
    def iterative(config):
        for step in range(1, 9):
            tune.report({"loss": (config["x"] ** 2 + config["y"]) / step})

    searcher = CompileIQSearcher(
        space=TOY_SPACE, metric="loss", mode="min", max_evaluations=16, seed=4
    )
    scheduler = ASHAScheduler(max_t=8, grace_period=1, reduction_factor=2)
    grid = _run(
        iterative, searcher, tmp_path, "asha", scheduler=scheduler, metric="loss", mode="min"
    )
    assert len(grid) == 16
    iterations = [r.info["training_iteration"] for r in searcher.results().records]
    assert min(iterations) < 8  # some trials were stopped early...
    assert len(searcher.results().ok_records) == 16  # ...and still count with their last value


class _InterruptOnce(tune.Callback):
    """Sends SIGINT (as Ctrl+C would) once, after `after` completed trials."""

    def __init__(self, after: int, marker: str) -> None:
        self.after, self.marker, self.done = after, marker, 0

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.done += 1
        if self.done >= self.after and not os.path.exists(self.marker):
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGINT)


def test_restore_after_interruption_ends_on_budget_without_repeats(tmp_path: Path) -> None:
    log = tmp_path / "evaluations.log"

    def logged(config):
        time.sleep(0.05)
        with open(log, "a") as f:
            f.write(json.dumps(config, sort_keys=True) + "\n")
        return {"score": config["x"] ** 2 + config["y"]}

    budget = 40
    searcher = CompileIQSearcher(
        space=TOY_SPACE, metric="score", mode="min", max_evaluations=budget, seed=5
    )
    callback = _InterruptOnce(after=15, marker=str(tmp_path / "interrupted"))
    first = _run(
        logged,
        searcher,
        tmp_path,
        "resume",
        max_concurrent_trials=2,
        run_kwargs={"callbacks": [callback]},
    )
    assert len(first) < budget  # the run really was interrupted
    grid = tune.Tuner.restore(str(tmp_path / "resume"), logged).fit()
    assert len(grid) == budget
    configs = [json.dumps(r.config, sort_keys=True) for r in grid]
    assert len(set(configs)) == budget
    executed = log.read_text().splitlines()
    # Trials in flight at the interruption are re-run by Tune (same trial, same config).
    assert set(executed) == set(configs)
    assert len(executed) - budget <= 2


def test_param_space_primitives_run_in_parallel_to_num_samples(tmp_path: Path) -> None:
    import ciq_tune.space as ss

    marker = tmp_path / "running"
    marker.mkdir()

    def objective(config):
        assert config.get("z") in ("flag", None)  # absent when knocked out
        path = marker / f"{os.getpid()}-{time.time_ns()}"
        path.touch()
        # The partner trial's worker may take many seconds to start on a loaded 2-core machine.
        deadline = time.monotonic() + 30.0
        running = 1
        while running < 2 and time.monotonic() < deadline:
            running = len(list(marker.iterdir()))
            time.sleep(0.05)
        time.sleep(0.2)
        running = max(running, len(list(marker.iterdir())))
        path.unlink()
        return {"score": config["x"] ** 2 + config["y"], "running": running}

    grid = tune.Tuner(
        objective,
        param_space={"x": tune.quniform(1.0, 20.0, 0.5)},
        tune_config=tune.TuneConfig(
            search_alg=CompileIQSearcher(
                space={"y": ss.choice([1, 2, 3]), "z": ss.literal("flag", knockout_prob=0.5)},
                constraints=["x * y <= 30"],
                seed=0,
            ),
            metric="score",
            mode="min",
            num_samples=8,
            max_concurrent_trials=2,
            reuse_actors=True,  # two workers start once, then every trial finds its partner
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="prims", verbose=0),
    ).fit()
    assert len(grid) == 8 and not grid.errors
    assert all(r.config["x"] * r.config["y"] <= 30 for r in grid)
    assert max(r.metrics["running"] for r in grid) == 2


def test_unset_max_concurrent_trials_is_warned(tmp_path: Path, caplog) -> None:
    searcher = CompileIQSearcher(metric="score", mode="min", seed=0)
    with caplog.at_level("WARNING", logger="searchers.compileiq_searcher"):
        grid = tune.Tuner(
            toy_trainable,
            param_space={"x": tune.quniform(1.0, 20.0, 0.5), "y": tune.choice([1, 2, 3])},
            tune_config=tune.TuneConfig(search_alg=searcher, num_samples=3),
            run_config=tune.RunConfig(storage_path=str(tmp_path), name="serial", verbose=0),
        ).fit()
    assert len(grid) == 3
    warned = [r.getMessage() for r in caplog.records if "one at a time" in r.getMessage()]
    assert len(warned) == 1 and "max_concurrent_trials=2" in warned[0]
