"""Tracking: one MLflow run per trial in an embedded store; failures are warnings, not errors."""

from __future__ import annotations

import logging
import shutil
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


def _replay(tmp_path: Path, events: list[dict[str, Any]]) -> tuple[int, str]:
    """`serve` over events that are all there at once (one batch), into a store in tmp_path."""
    import io
    import json

    from ciq_tune.tracking.writer_process import serve

    replies = io.StringIO()
    lines = io.StringIO("".join(json.dumps(e) + "\n" for e in events))
    status = serve(sqlite_uri(tmp_path), "direct", tmp_path / "art", lines, replies)
    return status, replies.getvalue()


def _trial(
    key: str, start_ms: int, end_ms: int, search: str = "direct", **params: Any
) -> list[dict[str, Any]]:
    tags = {"t": key, "ciq_tune.search": search}
    return [
        {"kind": "start", "trial": key, "time_ms": start_ms, "name": key, "tags": tags,
         "params": params},
        {"kind": "metrics", "trial": key, "time_ms": end_ms - 5, "metrics": {"ms": 2.0}, "step": 1},
        {"kind": "texts", "trial": key, "texts": {"compile_log": f"log of {key}"}},
        {"kind": "end", "trial": key, "time_ms": end_ms, "status": "FINISHED"},
    ]  # fmt: skip


def test_a_trial_that_arrives_whole_is_three_mlflow_calls_with_its_own_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow import MlflowClient

    calls: list[str] = []
    for name in ("create_run", "log_batch", "set_terminated", "log_param", "log_metric"):
        original = getattr(MlflowClient, name)

        def counted(self: Any, *a: Any, _name: str = name, _f: Any = original, **k: Any) -> Any:
            calls.append(_name)
            return _f(self, *a, **k)

        monkeypatch.setattr(MlflowClient, name, counted)
    events = _trial("t1", 1_700_000_000_000, 1_700_000_003_000, BM=64, flags="-O3")
    events += _trial("t2", 1_700_000_001_000, 1_700_000_004_000, BM=128)
    assert _replay(tmp_path, events) == (0, "done\n")
    # Per trial: create_run (tags, start time), one log_batch, set_terminated (end time).
    assert sorted(calls) == sorted(["create_run", "log_batch", "set_terminated"] * 2)
    client = MlflowClient(tracking_uri=sqlite_uri(tmp_path))
    experiment = client.get_experiment_by_name("direct")
    assert experiment is not None
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    t1 = runs["t1"]
    assert (t1.info.start_time, t1.info.end_time) == (1_700_000_000_000, 1_700_000_003_000)
    assert t1.info.status == "FINISHED"
    assert t1.data.params == {"BM": "64", "flags": "-O3"}
    assert t1.data.metrics == {"ms": 2.0}
    assert t1.data.tags["t"] == "t1"
    [metric] = client.get_metric_history(t1.info.run_id, "ms")
    assert metric.timestamp == 1_700_000_002_995
    assert [a.path for a in client.list_artifacts(t1.info.run_id)] == ["compile_log.txt"]
    assert runs["t2"].info.end_time == 1_700_000_004_000


def test_a_trial_split_over_batches_is_written_whole(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from ciq_tune import tracking
    from ciq_tune.tracking.writer_process import _write_trial

    uri = sqlite_uri(tmp_path)
    tracking.prepare_sqlite_store(uri)
    client = MlflowClient(tracking_uri=uri)
    experiment_id = tracking.ensure_experiment(uri, "split", tmp_path / "art")
    runs: dict[str, str] = {}
    # 250 parameters and 1500 metrics: more than one log_batch takes (100 and 1000).
    params = {f"p{i}": i for i in range(250)}
    metrics = {f"m{i}": float(i) for i in range(1500)}
    start = {"kind": "start", "trial": "t", "time_ms": 1000, "name": "t", "tags": {}}
    batches = [
        [{**start, "params": params}],
        [{"kind": "metrics", "trial": "t", "time_ms": 1500, "metrics": metrics, "step": 1}],
        [{"kind": "end", "trial": "t", "time_ms": 2000, "status": "FAILED"}],
    ]
    for batch in batches:  # as a writer that keeps up sees them
        assert _write_trial(client, experiment_id, runs, "t", batch) == []
    assert runs == {}  # ended
    [run] = client.search_runs([experiment_id])
    assert run.info.status == "FAILED"
    assert (run.info.start_time, run.info.end_time) == (1000, 2000)
    assert len(run.data.params) == 250
    assert len(run.data.metrics) == 1500


def test_a_command_interrupted_inside_background_writer_still_writes_every_record(
    tmp_path: Path,
) -> None:
    from ciq_tune.tracking import background_writer

    with (
        pytest.raises(KeyboardInterrupt),
        background_writer(TrackingConfig(), run_dir=tmp_path, search_name="cut") as writer,
    ):
        assert writer is not None
        for event in _trial("t1", 1000, 2000, "cut") + _trial("t2", 1500, 2500, "cut"):
            writer.send(event)
        raise KeyboardInterrupt  # what Ctrl+C raises in the command
    runs = trial_runs(sqlite_uri(tmp_path), "cut")
    assert sorted(runs["run_name"]) == ["t1", "t2"]
    assert set(runs["status"]) == {"FINISHED"}
    with background_writer(TrackingConfig(backend="none"), run_dir=tmp_path, search_name="x") as w:
        assert w is None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
def test_tune_command_returns_with_every_evaluation_in_mlflow_at_the_trials_times(
    ray_cluster: None, tmp_path: Path
) -> None:
    import time

    import pandas as pd

    from ciq_tune.cli import main

    example = Path(__file__).parents[2] / "examples/kernels/ptx/spill.yaml"
    out = tmp_path / "out"
    started_ms = time.time() * 1000
    args = ["--budget", "6", "--num-cpus", "2", "--runtime", "ray", "--out", str(out)]
    assert main(["tune", str(example), *args]) == 0
    evaluations = pd.read_csv(out / "evaluations.csv")
    runs = trial_runs(sqlite_uri(out), "spill")
    assert len(runs) == len(evaluations) == 6
    assert set(runs["status"]) <= {"FINISHED", "FAILED"}
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=sqlite_uri(out))
    for run_id in runs["run_id"]:
        info = client.get_run(run_id).info
        assert started_ms <= info.start_time <= info.end_time <= time.time() * 1000


def test_a_writer_that_is_behind_takes_its_backlog_without_waiting_for_the_batch_window() -> None:
    import queue
    import threading
    import time

    from ciq_tune.tracking.writer_process import BATCH_WINDOW_S
    from ciq_tune.tracking.writer_process import _next_batch

    lines: queue.Queue[tuple[float, str | None]] = queue.Queue()
    old = time.monotonic() - 10 * BATCH_WINDOW_S  # arrived while MLflow was being imported
    for line in ("a", "b", "c"):
        lines.put((old, line))
    started = time.monotonic()
    assert _next_batch(lines) == (["a", "b", "c"], False)
    assert time.monotonic() - started < BATCH_WINDOW_S / 2
    # A fresh event waits for the window's later ones; the end of the events ends the batch.
    lines.put((time.monotonic(), "d"))
    threading.Timer(BATCH_WINDOW_S / 4, lambda: lines.put((time.monotonic(), "e"))).start()
    threading.Timer(BATCH_WINDOW_S / 2, lambda: lines.put((time.monotonic(), None))).start()
    assert _next_batch(lines) == (["d", "e"], True)


def test_the_writer_runs_at_the_lowest_priority_without_mlflow_telemetry_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import subprocess

    from ciq_tune.tracking import MlflowWriter
    from ciq_tune.tracking.writer import WRITER_NICENESS
    from ciq_tune.tracking.writer import writer_environment

    assert writer_environment({})["MLFLOW_DISABLE_TELEMETRY"] == "true"
    for chosen in ({"MLFLOW_DISABLE_TELEMETRY": "false"}, {"DO_NOT_TRACK": "0"}):
        assert writer_environment(chosen) == chosen
    # What the writer is started with (reading /proc/PID/environ races its exec).
    given: list[dict[str, str]] = []
    popen = subprocess.Popen

    def recording_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[str]:
        given.append(kwargs["env"])
        return popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    writer = MlflowWriter(sqlite_uri(tmp_path), "nice", tmp_path / "art")
    writer.start()
    try:
        assert given == [writer_environment(os.environ)]
        assert writer.pid is not None
        assert os.getpriority(os.PRIO_PROCESS, writer.pid) == WRITER_NICENESS
        autogroup = Path(f"/proc/{writer.pid}/autogroup")
        # Linux: the writer's session is a scheduling group of its own.
        if autogroup.exists() and os.access(autogroup, os.W_OK):
            assert autogroup.read_text().split()[-1] == str(WRITER_NICENESS)
    finally:
        writer.close()


def test_closing_gives_the_writers_session_a_fair_share_of_the_cpu_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Waiting in `close`, the search runs nothing: at niceness 19 the writer's session starved
    # on a node that other work kept busy.
    from ciq_tune.tracking import writer as tracking

    calls: list[tuple[int, int]] = []
    set_niceness = tracking.set_session_niceness

    def recording(pid: int, niceness: int) -> bool:
        calls.append((pid, niceness))
        return set_niceness(pid, niceness)

    monkeypatch.setattr(tracking, "set_session_niceness", recording)
    writer = tracking.MlflowWriter(sqlite_uri(tmp_path), "fair", tmp_path / "art")
    writer.start()  # importing MLflow takes the writer seconds: it is alive at `close`
    writer.close()
    assert calls == [(writer.pid, tracking.WRITER_NICENESS), (writer.pid, 0)]


def test_a_sessions_niceness_is_lowered_and_given_back() -> None:
    from ciq_tune.tracking.writer import set_session_niceness

    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    autogroup = Path(f"/proc/{sleeper.pid}/autogroup")
    try:
        if not autogroup.exists():
            pytest.skip("no autogroup scheduling on this kernel")
        for niceness in (19, 0):
            assert set_session_niceness(sleeper.pid, niceness)
            assert autogroup.read_text().split()[-1] == str(niceness)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not set_session_niceness(sleeper.pid, 0)  # the process has exited


def test_the_writer_syncs_its_sqlite_store_at_checkpoints_only(tmp_path: Path) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy import text

    status, _ = _replay(tmp_path, _trial("t1", 1_000, 2_000))
    assert status == 0
    # 1 = NORMAL (sqlite's default is 2 = FULL: a sync at every commit).
    with create_engine(sqlite_uri(tmp_path)).connect() as connection:
        assert connection.execute(text("PRAGMA synchronous")).scalar() == 1
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
