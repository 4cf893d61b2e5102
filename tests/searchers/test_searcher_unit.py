"""CompileIQSearcher without a Tune run: the Searcher contract driven by hand."""

from __future__ import annotations

import json
import math

import pytest
from ray import tune
from ray.tune.search import Searcher

import ciq_tune.space as ss
from ciq_tune import CompileIQSearcher
from ciq_tune.errors import StateError
from tests.engine.conftest import TOY_SPACE
from tests.engine.conftest import toy


def _searcher(**kwargs) -> CompileIQSearcher:
    kwargs.setdefault("max_evaluations", 30)
    return CompileIQSearcher(space=TOY_SPACE, metric="score", mode="min", seed=0, **kwargs)


def test_lazy_reexport_and_no_ray_in_core() -> None:
    import subprocess
    import sys

    code = "import sys, ciq_tune, ciq_tune.engine; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    from searchers import CompileIQSearcher as direct

    assert CompileIQSearcher is direct


def test_suggest_complete_until_finished() -> None:
    searcher = _searcher(max_evaluations=20)
    seen = []
    for i in range(100):
        config = searcher.suggest(f"t{i}")
        if config == Searcher.FINISHED:
            break
        assert config is not None  # one at a time: never waits with nothing running
        seen.append(json.dumps(config, sort_keys=True))
        searcher.on_trial_complete(f"t{i}", {"score": toy(config)})
    assert len(seen) == 20 == len(set(seen))
    assert len(searcher.results()) == 20


def test_errors_nan_missing_metric_and_reported_status_are_failures() -> None:
    searcher = _searcher()
    outcomes = {
        "a": dict(error=True),
        "b": dict(result={"score": math.nan}),
        "c": dict(result={"other": 1.0}),
        "d": dict(result={"score": math.inf}),
        "e": dict(result={"score": math.nan, "status": "compile_error"}),
        "f": dict(result={"score": 3.0}),
    }
    for trial_id, kwargs in outcomes.items():
        searcher.suggest(trial_id)
        searcher.on_trial_complete(trial_id, **kwargs)
    statuses = [r.status for r in searcher.results().records]
    assert statuses == [
        "error",
        "invalid_result",
        "missing_metric",
        "invalid_result",
        "compile_error",
        "ok",
    ]


def test_second_completion_and_unknown_trials_are_ignored(caplog) -> None:
    searcher = _searcher()
    config = searcher.suggest("t1")
    assert searcher.suggest("t1") == config  # idempotent for the same trial
    searcher.on_trial_complete("t1", {"score": 1.0})
    searcher.on_trial_complete("t1", {"score": 0.0})
    searcher.on_trial_complete("never", {"score": 0.0})
    assert [r.values for r in searcher.results().records] == [{"score": 1.0}]
    assert "second time" in caplog.text and "not suggested" in caplog.text


def test_early_stopped_trial_uses_its_last_reported_result() -> None:
    searcher = _searcher()
    searcher.suggest("t1")
    searcher.on_trial_result("t1", {"score": 9.0, "training_iteration": 1})
    searcher.on_trial_result("t1", {"score": 7.0, "training_iteration": 2})
    searcher.on_trial_complete("t1", None)
    record = searcher.results().records[0]
    assert record.values == {"score": 7.0}
    assert record.info["training_iteration"] == 2


def test_concurrency_limit_holds_back_suggestions() -> None:
    searcher = _searcher()
    assert searcher.set_max_concurrency(2)
    assert searcher.suggest("a") is not None
    assert searcher.suggest("b") is not None
    assert searcher.suggest("c") is None
    searcher.on_trial_complete("a", {"score": 1.0})
    assert searcher.suggest("c") is not None


def test_save_and_restore_on_a_bare_searcher_keeps_trials_in_flight(tmp_path) -> None:
    searcher = _searcher(max_evaluations=25)
    for i in range(6):
        searcher.suggest(f"t{i}")
    for i in range(4):
        searcher.on_trial_complete(f"t{i}", {"score": float(i)})
    path = tmp_path / "searcher.json"
    searcher.save(str(path))
    restored = CompileIQSearcher()
    restored.restore(str(path))
    for s in (searcher, restored):
        s.on_trial_complete("t4", {"score": 4.0})
        s.on_trial_complete("t5", {"score": 5.0})
    keys = []
    for s in (searcher, restored):
        proposals = []
        for i in range(6, 60):
            config = s.suggest(f"t{i}")
            if config == Searcher.FINISHED:
                break
            proposals.append(json.dumps(config, sort_keys=True))
            s.on_trial_complete(f"t{i}", {"score": toy(config)})
        keys.append(proposals)
    assert keys[0] == keys[1]
    assert len(restored.results()) == 25
    with pytest.raises(StateError, match="schema"):
        restored.set_state({"schema": 0})


def test_missing_space_or_metric_gives_ray_style_errors() -> None:
    with pytest.raises(RuntimeError, match="no search space"):
        CompileIQSearcher(metric="m", mode="min").suggest("t")
    with pytest.raises(RuntimeError, match="metric"):
        CompileIQSearcher(space=TOY_SPACE).suggest("t")
    with pytest.raises(ValueError, match="one direction per metric"):
        CompileIQSearcher(space=TOY_SPACE, metric=["a", "b"], mode=["min"])
    with pytest.raises(ValueError, match="'min' or 'max'"):
        CompileIQSearcher(space=TOY_SPACE, metric="a", mode="down")


def test_param_space_constants_with_space_and_param_space_alone() -> None:
    searcher = _searcher()
    assert searcher.set_search_properties(None, None, {"constant": 3})
    assert searcher.engine.space.keys == ("x", "y", "z")
    bare = CompileIQSearcher(metric="score", mode="min", max_evaluations=5, seed=0)
    assert bare.set_search_properties(None, None, {"a": tune.randint(0, 4), "c": 3})
    config = bare.suggest("t")
    assert config["a"] in range(4) and config["c"] == 3


def test_convert_search_space_maps_every_bounded_domain() -> None:
    space = CompileIQSearcher.convert_search_space(
        {
            "cat": tune.choice(["a", "b"]),
            "int": tune.randint(1, 5),
            "qint": tune.qrandint(0, 64, 16),
            "flt": tune.uniform(0.5, 1.5),
            "log": tune.loguniform(1e-4, 1e-1),
            "qflt": tune.quniform(0.0, 1.0, 0.25),
            "nested": {"k": tune.choice([1, 2])},
            "const": 7,
        }
    )
    assert space["cat"].values == ("a", "b")
    assert space["int"].values == (1, 2, 3, 4)
    assert space["qint"].values == (0, 16, 32, 48, 64)
    assert (space["flt"].low, space["flt"].high, space["flt"].log) == (0.5, 1.5, False)
    assert space["log"].log
    assert space["qflt"].values == (0.0, 0.25, 0.5, 0.75, 1.0)
    assert space["nested"]["k"].values == (1, 2)
    assert space["const"] == 7
    with pytest.warns(UserWarning, match="log-spaced"):
        converted = CompileIQSearcher.convert_search_space({"n": tune.lograndint(1, 1000)})
    assert len(converted["n"].values) <= 32
    with pytest.raises(ValueError, match="no bounded equivalent"):
        CompileIQSearcher.convert_search_space({"r": tune.randn()})
    with pytest.raises(ValueError, match="dict"):
        CompileIQSearcher(space=[ss.range(1, 2)])


def test_multi_objective_metrics_and_weights() -> None:
    searcher = CompileIQSearcher(
        space=TOY_SPACE, metric=["t", "e"], mode=["min", "max"], generations=2, seed=1
    )
    for i in range(200):
        config = searcher.suggest(f"t{i}")
        if config == Searcher.FINISHED:
            break
        searcher.on_trial_complete(f"t{i}", {"t": config["x"], "e": config["y"]})
    assert searcher.engine.name == "nsga2"
    results = searcher.results()
    front = results.pareto_front()
    assert front
    for f in front:  # nothing evaluated is at least as good in both and better in one
        for r in results.ok_records:
            t, e = r.values["t"], r.values["e"]
            assert not (
                t <= f.values["t"]
                and e >= f.values["e"]
                and (t, e) != (f.values["t"], f.values["e"])
            )
    with pytest.raises(ValueError, match="weights"):
        CompileIQSearcher(space=TOY_SPACE, metric=["a", "b"], mode="min", weights=[1]).suggest("x")


def _drive(searcher: CompileIQSearcher, limit: int = 1000) -> list[dict]:
    configs = []
    for i in range(limit):
        config = searcher.suggest(f"t{i}")
        if config == Searcher.FINISHED:
            break
        assert config is not None
        configs.append(config)
        searcher.on_trial_complete(f"t{i}", {"score": toy(config)})
    return configs


def test_no_budget_runs_tunes_num_samples() -> None:
    searcher = CompileIQSearcher(seed=0)
    assert searcher.set_search_properties("score", "min", dict(TOY_SPACE), num_samples=70)
    assert len(_drive(searcher)) == 70  # the default strategy's 10 generations would be 40
    assert "num_samples=70" in searcher.budget_note()


def test_no_budget_and_unbounded_samples_stop_on_convergence() -> None:
    searcher = CompileIQSearcher(seed=0)
    assert searcher.set_search_properties("score", "min", dict(TOY_SPACE), num_samples=-1)
    configs = _drive(searcher)
    assert searcher.engine.stop_reason == "no improvement in 20 generations"
    assert 80 <= len(configs) < 234  # 20 generations of the pool of 4; the space has 234
    note = searcher.budget_note()
    assert "20 generations (pool_size=4) without improvement" in note and "\n" not in note


def test_a_given_budget_wins_over_num_samples() -> None:
    searcher = CompileIQSearcher(generations=3, pool_size=5, seed=0)
    searcher.set_search_properties("score", "min", dict(TOY_SPACE), num_samples=200)
    assert len(_drive(searcher)) == 15  # generations × pool_size
    assert "max_generations=3 (pool_size=5)" in searcher.budget_note()


def test_space_primitives_join_param_space_domains_under_one_constraint() -> None:
    searcher = CompileIQSearcher(
        space={"y": ss.choice([1, 2, 3]), "z": ss.literal("flag", knockout_prob=0.5)},
        constraints=["x * y <= 30"],  # x comes from param_space
        seed=0,
    )
    param_space = {"x": tune.quniform(1.0, 20.0, 0.5), "const": "k"}
    assert searcher.set_search_properties("score", "min", param_space, num_samples=40)
    configs = _drive(searcher)
    assert len(configs) == 40
    assert all(c["x"] * c["y"] <= 30 for c in configs)
    assert {c.get("z") for c in configs} == {"flag", None}
    clash = CompileIQSearcher(space={"x": ss.choice([1, 2])})
    with pytest.raises(ValueError, match=r"\['x'\] are in both"):
        clash.set_search_properties("score", "min", {"x": tune.choice([1, 2])})


def test_primitives_hidden_by_tune_in_param_space_say_to_use_space() -> None:
    # Tune replaces a non-domain object with ("__ref_ph", hash) before a searcher sees it.
    hidden = {"y": ("__ref_ph", "0f3a9c1e"), "const": 3}
    with pytest.raises(ValueError, match=r"\['y'\].*CompileIQSearcher\(space="):
        CompileIQSearcher().set_search_properties("score", "min", hidden)


def test_space_argument_leaves_knocked_out_parameters_absent() -> None:
    configs = _drive(_searcher(max_evaluations=30))
    assert any("z" not in c for c in configs)
    assert {c["z"] for c in configs if "z" in c} == {"flag"}


def test_transfer_from_an_earlier_runs_table(tmp_path) -> None:
    from ciq_tune.errors import ReportError

    with pytest.raises(ReportError, match="is not an evaluations table nor a folder"):
        _searcher(transfer_from=tmp_path / "nothing")
    earlier = _searcher(max_evaluations=12)
    for i in range(12):
        config = earlier.suggest(f"e{i}")
        earlier.on_trial_complete(f"e{i}", {"score": (config["x"] - 6) ** 2 + config["y"]})
    earlier.results().to_csv(tmp_path / "evaluations.csv")
    best = [r.config for r in earlier.results().best(4)]

    searcher = _searcher(transfer_from=tmp_path)  # the run folder: its evaluations.csv
    restored = _searcher()
    restored.set_state(json.loads(json.dumps(searcher.get_state())))
    for s in (searcher, restored):
        assert [s.suggest(f"t{i}") for i in range(4)] == best
    for i in range(4):
        searcher.on_trial_complete(f"t{i}", {"score": 1.0})
    assert [r.origin for r in searcher.results().records] == ["transfer"] * 4


def test_space_alone_without_metric_says_tune_passes_it_only_with_a_param_space() -> None:
    searcher = CompileIQSearcher(space=TOY_SPACE, seed=0)
    with pytest.raises(RuntimeError, match=r"only with a non-empty Tuner\(param_space"):
        searcher.suggest("t0")
    # Once Tune has called `set_search_properties`, a missing metric is Tune's to pass.
    told = CompileIQSearcher(space=TOY_SPACE, seed=0)
    told.set_search_properties(None, None, {}, num_samples=4)
    with pytest.raises(RuntimeError, match=r"tune\.TuneConfig\(\)"):
        told.suggest("t0")
