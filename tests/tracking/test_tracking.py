"""Tracking: one MLflow run per trial in an embedded store; failures are warnings, not errors."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("mlflow")

from ray import tune  # noqa: E402

from ciq_tune.tracking import TrackingConfig  # noqa: E402
from ciq_tune.tracking import sqlite_uri  # noqa: E402
from ciq_tune.tracking import trial_runs  # noqa: E402
from searchers.tracking import LoggingCallback  # noqa: E402
from searchers.tracking import SafeCallback  # noqa: E402
from searchers.tracking import tracking_callbacks  # noqa: E402

SAMPLES = 3


def kernel_trainable(config: dict[str, Any]) -> None:
    # Stands in for an objective: a time, a compile log, and a controls file in the trial dir.
    trial_dir = Path(tune.get_context().get_trial_dir())
    controls = trial_dir / "best.controls.yaml"
    controls.write_text(f"schema: ciq-tune/controls\nparams: {{BM: {config['BM']}}}\n")
    tune.report(
        {
            "time_ms": 0.2 * 64 / config["BM"],
            "status": "ok",
            "compile_log": f"ptxas info: Used {config['BM'] // 2} registers",
            "controls_file": str(controls),
        }
    )


def run_search(tmp_path: Path, callbacks: list[Any], name: str = "tiny") -> tune.ResultGrid:
    tuner = tune.Tuner(
        kernel_trainable,
        param_space={"BM": tune.choice([32, 64, 128]), "flags": {"fmad": tune.choice([0, 1])}},
        tune_config=tune.TuneConfig(num_samples=SAMPLES, reuse_actors=True),
        run_config=tune.RunConfig(
            name=name, storage_path=str(tmp_path / "ray"), callbacks=callbacks, verbose=0
        ),
    )
    return tuner.fit()


@pytest.mark.slow
def test_mlflow_run_per_trial_with_params_metrics_artifacts(
    ray_cluster: None, tmp_path: Path
) -> None:
    from mlflow import MlflowClient

    callbacks = tracking_callbacks(None, run_dir=tmp_path, search_name="tiny")
    grid = run_search(tmp_path, callbacks)
    assert grid.num_errors == 0
    assert (tmp_path / "mlflow.db").is_file()
    runs = trial_runs(sqlite_uri(tmp_path), "tiny")
    assert len(runs) == SAMPLES
    assert set(runs["status"]) == {"FINISHED"}
    assert set(runs["tags.ciq_tune.search"]) == {"tiny"}
    # Nested config keys become "flags/fmad" parameters; results become metrics.
    by_bm = {int(p): t for p, t in zip(runs["params.BM"], runs["metrics.time_ms"], strict=True)}
    assert all(t == pytest.approx(0.2 * 64 / bm) for bm, t in by_bm.items())
    assert "params.flags/fmad" in runs.columns
    client = MlflowClient(tracking_uri=sqlite_uri(tmp_path))
    run_id = runs["run_id"].iloc[0]
    files = {a.path for a in client.list_artifacts(run_id)}
    assert {"compile_log.txt", "best.controls.yaml"} <= files
    local = Path(client.download_artifacts(run_id, "compile_log.txt", str(tmp_path)))
    assert local.read_text().startswith("ptxas info: Used")
    # Artifacts live beside the store, not in the driver's working directory.
    assert any((tmp_path / "mlartifacts").rglob("best.controls.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["bad_uri", "unwritable_dir"])
def test_tracking_failure_never_breaks_a_search(
    ray_cluster: None, tmp_path: Path, caplog: pytest.LogCaptureFixture, broken: str
) -> None:
    if broken == "bad_uri":
        config = TrackingConfig(tracking_uri="nosuchscheme://nowhere")
        run_dir = tmp_path
    else:
        # A folder below a regular file can never be created, whatever the user's rights.
        (tmp_path / "file").write_text("")
        config = None
        run_dir = tmp_path / "file" / "run"
    callbacks = tracking_callbacks(config, run_dir=run_dir, search_name="tiny")
    with caplog.at_level(logging.WARNING, logger="ciq_tune.tracking"):
        grid = run_search(tmp_path, callbacks)
    assert grid.num_errors == 0
    assert len(grid) == SAMPLES
    assert all(r.metrics["status"] == "ok" for r in grid)
    assert "tracking is off for this search" in caplog.text
    assert callbacks[0].disabled


@pytest.mark.slow
def test_logging_backend_writes_one_line_per_result(
    ray_cluster: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    callbacks = tracking_callbacks(TrackingConfig(backend="log"), run_dir=tmp_path, search_name="t")
    with caplog.at_level(logging.INFO, logger="ciq_tune.tracking"):
        run_search(tmp_path, callbacks, name="logged")
    lines = [r.getMessage() for r in caplog.records if "result=" in r.getMessage()]
    assert len(lines) == SAMPLES
    assert "'time_ms'" in lines[0]
    assert not (tmp_path / "mlflow.db").exists()


def test_none_backend_has_no_callbacks(tmp_path: Path) -> None:
    assert (
        tracking_callbacks(TrackingConfig(backend="none"), run_dir=tmp_path, search_name="x") == []
    )


class _Exploding(LoggingCallback):
    def __init__(self) -> None:
        self.calls = 0

    def on_trial_result(self, **info: Any) -> None:
        self.calls += 1
        raise OSError("disk full")


def test_safe_callback_warns_once_per_hook_and_keeps_forwarding(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = _Exploding()
    safe = SafeCallback(inner)
    with caplog.at_level(logging.WARNING, logger="ciq_tune.tracking"):
        safe.setup()
        for _ in range(3):
            safe.on_trial_result(iteration=1, trials=[], trial=None, result={})
    assert inner.calls == 3
    assert not safe.disabled
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "on_trial_result failed" in warnings[0].getMessage()
    assert "disk full" in warnings[0].getMessage()


def test_core_modules_do_not_import_ray_mlflow_or_matplotlib() -> None:
    code = (
        "import sys, ciq_tune, ciq_tune.tracking, ciq_tune.report, ciq_tune.validation\n"
        "print(sorted({'ray', 'mlflow', 'matplotlib', 'sklearn'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_writer_process_keeps_going_past_a_bad_event_and_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ciq_tune.tracking import MlflowWriter

    writer = MlflowWriter(sqlite_uri(tmp_path), "direct", tmp_path / "mlartifacts")
    writer.start()
    writer.send({"kind": "metrics", "trial": "never-started", "metrics": {"a": 1.0}, "step": 1})
    for trial in ("t1", "t2"):
        writer.send({"kind": "start", "trial": trial, "name": trial, "tags": {}, "params": {}})
        writer.send({"kind": "metrics", "trial": trial, "metrics": {"time_ms": 2.0}, "step": 1})
        writer.send({"kind": "end", "trial": trial, "status": "FINISHED"})
    with caplog.at_level(logging.WARNING, logger="ciq_tune.tracking"):
        writer.close()  # returns once every event is in the store
    assert "tracking: writing metrics: KeyError" in caplog.text
    client_runs = trial_runs(sqlite_uri(tmp_path), "direct")
    assert len(client_runs) == 0  # no search tag: the runs are there but not this search's
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=sqlite_uri(tmp_path))
    experiment = client.get_experiment_by_name("direct")
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["t1", "t2"]
    assert {r.data.metrics["time_ms"] for r in runs} == {2.0}
    assert {r.info.status for r in runs} == {"FINISHED"}


@pytest.mark.slow
def test_new_sqlite_store_is_a_wal_copy_of_the_cached_schema_and_existing_files_are_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from ciq_tune.tracking import ensure_experiment
    from ciq_tune.tracking import prepare_sqlite_store

    def journal_mode(path: Path) -> str:
        connection = sqlite3.connect(path)
        try:
            return str(connection.execute("PRAGMA journal_mode").fetchone()[0])
        finally:
            connection.close()

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("first", "second"):  # the first builds the schema template, the second copies
        (tmp_path / name).mkdir()
        prepare_sqlite_store(sqlite_uri(tmp_path / name))
        assert journal_mode(tmp_path / name / "mlflow.db") == "wal"
        ensure_experiment(sqlite_uri(tmp_path / name), "copied", tmp_path / name / "art")
    assert len(list((tmp_path / "cache" / "ciq-tune" / "mlflow").glob("empty-store-*.db"))) == 1
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=sqlite_uri(tmp_path / "second"))
    experiment = client.get_experiment_by_name("copied")
    assert experiment is not None
    run = client.create_run(experiment.experiment_id, run_name="r")
    client.set_terminated(run.info.run_id)
    assert [r.info.run_name for r in client.search_runs([experiment.experiment_id])] == ["r"]
    existing = tmp_path / "old" / "mlflow.db"
    existing.parent.mkdir()
    sqlite3.connect(existing).close()
    prepare_sqlite_store(sqlite_uri(existing.parent))
    assert journal_mode(existing) == "delete"
    for other in ("databricks", "http://127.0.0.1:5000", "sqlite://"):
        prepare_sqlite_store(other)  # not a sqlite file: nothing to prepare


def test_ctrl_c_reaches_the_search_but_not_its_writer(tmp_path: Path) -> None:
    driver = f"""
import os, signal
from pathlib import Path
from ciq_tune.tracking import MlflowWriter, sqlite_uri
# Tune handles Ctrl-C with a handler of its own (a child process starts with the default).
signal.signal(signal.SIGINT, lambda *_: None)
writer = MlflowWriter(sqlite_uri({str(tmp_path)!r}), "direct", Path({str(tmp_path)!r}) / "art")
writer.start()
writer.send({{"kind": "start", "trial": "t1", "name": "t1", "tags": {{}}, "params": {{}}}})
os.killpg(0, signal.SIGINT)  # what Ctrl-C does: the terminal's whole foreground group
writer.send({{"kind": "metrics", "trial": "t1", "metrics": {{"time_ms": 2.0}}, "step": 1}})
writer.send({{"kind": "end", "trial": "t1", "status": "FINISHED"}})
writer.close()
"""
    # In its own group, so that the SIGINT reaches the driver and not pytest.
    subprocess.run([sys.executable, "-c", driver], check=True, start_new_session=True, timeout=300)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=sqlite_uri(tmp_path))
    experiment = client.get_experiment_by_name("direct")
    [run] = client.search_runs([experiment.experiment_id])
    assert (run.info.status, run.data.metrics) == ("FINISHED", {"time_ms": 2.0})
