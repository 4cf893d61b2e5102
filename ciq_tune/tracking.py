"""Experiment tracking settings, MLflow helpers and the background MLflow writer; MLflow is
imported only when used (by the writer, in its own process).

    python -m ciq_tune.tracking --uri sqlite:///out/mlflow.db --experiment NAME --artifacts DIR

runs the writer: it reads one JSON event per line on stdin (`MlflowWriter` sends them) and
writes them to MLflow, so that a search never waits for the store.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING
from typing import Any
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger("ciq_tune.tracking")

DB_NAME = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"
SEARCH_TAG = "ciq_tune.search"


class TrackingConfig(BaseModel):
    """Where and how a search records its trials.

    Attributes:
        backend: "mlflow" (default): one MLflow run per trial, with the configuration as
            parameters, the results as metrics and the compile log and controls file as
            artifacts, under one experiment per search; "log": one log line per result
            (Python logging, no files); "none".
        tracking_uri: MLflow store (default: the embedded `sqlite:///<run dir>/mlflow.db`; no
            server is needed to write it, `mlflow ui --backend-store-uri …` shows it).
        experiment_name: MLflow experiment (default: the search's name).
        tags: extra tags on every run (e.g. git commit, user).
        artifact_keys: result keys whose text is stored as `<key>.txt` artifacts.
        artifact_path_keys: result keys naming a file to store (e.g. the controls file).
        artifact_globs: files of the trial folder to store.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["mlflow", "log", "none"] = "mlflow"
    tracking_uri: str | None = None
    experiment_name: str | None = Field(default=None, min_length=1)
    tags: dict[str, str] = Field(default_factory=dict)
    artifact_keys: tuple[str, ...] = ("compile_log", "error")
    artifact_path_keys: tuple[str, ...] = ("controls_file",)
    artifact_globs: tuple[str, ...] = ("*.log", "*.controls.yaml")


def sqlite_uri(directory: str | Path) -> str:
    """The embedded store of a run folder: `sqlite:///<absolute dir>/mlflow.db`."""
    return f"sqlite:///{Path(directory).resolve() / DB_NAME}"


def search_tags(search_name: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Tags that group a search's runs: the search name and the ciq-tune version."""
    from ciq_tune._version import __version__

    return {SEARCH_TAG: search_name, "ciq_tune.version": __version__, **dict(extra or {})}


def prepare_sqlite_store(tracking_uri: str) -> None:
    """Create a new sqlite store's file, with MLflow's tables, in write-ahead-log mode (a no-op
    for other stores and existing files).

    In its default rollback-journal mode sqlite syncs the journal and the database on every
    commit; a WAL commit syncs one append to the log. MLflow commits several times per call,
    so on the 2-core VM's disk WAL halves the writing of a trial (~150 ms -> ~75 ms). The mode
    is stored in the file, so MLflow's own connections and `mlflow ui` use it too. WAL needs
    the store on a local file system (not NFS), which an embedded store should be on anyway.

    MLflow builds a new store's tables by running its ~50 schema migrations (5.5 s of CPU on
    the VM, while the search's first trials run), so the tables come from a copy of an empty
    store that MLflow built once per MLflow version (`schema_template`); without one (the cache
    is not writable) MLflow builds them in place.
    """
    import sqlite3

    from sqlalchemy.engine import make_url

    if not tracking_uri.startswith("sqlite:"):
        return  # "databricks", "http://…", "file:…" and the like are not sqlite URLs
    url = make_url(tracking_uri)
    if not url.database or url.database == ":memory:":
        return
    path = Path(url.database)
    if path.exists():
        return
    template = schema_template()
    with contextlib.closing(sqlite3.connect(path)) as connection:
        if template is not None:
            with contextlib.closing(sqlite3.connect(template)) as source:
                source.backup(connection)
        connection.execute("PRAGMA journal_mode=WAL")


def sync_sqlite_at_checkpoints() -> None:
    """Make every sqlite connection this process opens from now on sync to disk at WAL
    checkpoints only (`PRAGMA synchronous=NORMAL`), not at each of MLflow's ~6 commits per
    trial, whose syncs also stall the search's own file writes. A crash of the process loses
    nothing; a power cut may lose the last commits, which evaluations.csv also holds. Called in
    the writer process only: it applies process-wide."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _sync_at_checkpoints):
        event.listen(Engine, "connect", _sync_at_checkpoints)


def _sync_at_checkpoints(connection: Any, _record: Any) -> None:
    import sqlite3

    if isinstance(connection, sqlite3.Connection):
        connection.execute("PRAGMA synchronous=NORMAL")


def schema_template() -> Path | None:
    """An empty MLflow sqlite store (tables and MLflow's "Default" experiment, no runs) built by
    this MLflow version, cached as `~/.cache/ciq-tune/mlflow/empty-store-<version>.db`
    (`$XDG_CACHE_HOME` if set); None if it cannot be built there."""
    import sqlite3

    import mlflow
    from mlflow import MlflowClient

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ciq-tune"
    template = cache / "mlflow" / f"empty-store-{mlflow.__version__}.db"
    if template.is_file():
        return template
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=template.parent) as work:
            built = Path(work) / "built.db"
            with contextlib.closing(sqlite3.connect(built)) as connection:
                connection.execute("PRAGMA journal_mode=WAL")
            MlflowClient(tracking_uri=f"sqlite:///{built}").search_experiments()  # migrates
            staged = Path(work) / "staged.db"
            # sqlite's backup copies a consistent snapshot, the log's pages included; the
            # rename publishes it whole to searches starting at the same time.
            with (
                contextlib.closing(sqlite3.connect(built)) as source,
                contextlib.closing(sqlite3.connect(staged)) as target,
            ):
                source.backup(target)
            os.replace(staged, template)
    except Exception as exc:  # MLflow's, sqlite's or the file system's: build in place
        logger.debug("no MLflow schema template in %s: %s", template.parent, exc)
        return None
    return template


def ensure_experiment(tracking_uri: str, name: str, artifact_dir: str | Path) -> str:
    """The id of experiment `name`, created with its artifacts under `artifact_dir` if new
    (MLflow's default would be a `mlruns/` folder in whatever directory the driver runs in)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    existing = client.get_experiment_by_name(name)
    if existing is not None:
        return str(existing.experiment_id)
    location = Path(artifact_dir).resolve().as_uri()
    return str(client.create_experiment(name, artifact_location=location))


def trial_runs(tracking_uri: str, search_name: str) -> pd.DataFrame:
    """The MLflow runs of one search, one row per trial: `run_id`, `run_name`, `status`, then
    `params.*`, `metrics.*` (last values) and `tags.*` columns (empty when there are none)."""
    import pandas as pd
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name(search_name)
    if experiment is None:
        return pd.DataFrame(columns=["run_id", "run_name", "status"])
    runs = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`{SEARCH_TAG}` = '{search_name}'"
    )
    rows = []
    for run in runs:
        row: dict[str, object] = {
            "run_id": run.info.run_id,
            "run_name": run.info.run_name,
            "status": run.info.status,
        }
        row.update({f"params.{k}": v for k, v in run.data.params.items()})
        row.update({f"metrics.{k}": v for k, v in run.data.metrics.items()})
        row.update({f"tags.{k}": v for k, v in run.data.tags.items()})
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else ["run_id", "run_name", "status"])


# MLflow's limit on a parameter value's length (characters); longer values are cut.
MAX_PARAM_CHARS = 6000


class TrackingUnavailable(RuntimeError):
    """The MLflow writer could not open the store; tracking is off for the search."""


# The writer's niceness (Unix: 19 is the lowest priority).
WRITER_NICENESS = 19
# Tries of a write to /proc/PID/autogroup: the kernel refuses a non-admin one within 100 ms of
# another (EAGAIN), whoever wrote before.
AUTOGROUP_TRIES = 5


def set_session_niceness(pid: int, niceness: int) -> bool:
    """Set the niceness (0-19) of the scheduling group of `pid`'s session (Linux with
    autogroup scheduling, sched(7): the CPU is shared between sessions first, then between
    their processes); any user may set it back to 0. Returns False where there is no such
    group or the process has exited."""
    path = Path(f"/proc/{pid}/autogroup")
    for _ in range(AUTOGROUP_TRIES):
        try:
            path.write_text(str(niceness))
            return True
        except BlockingIOError:
            time.sleep(0.1)
        except OSError:
            return False
    return False


def writer_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The writer's environment: `environ`, with MLflow's usage telemetry off unless the user
    set it (`MLFLOW_DISABLE_TELEMETRY` or `DO_NOT_TRACK`). The writer is ciq-tune's plumbing,
    not the user's use of MLflow, and the telemetry is ~0.5 s of its CPU on the 2-core VM."""
    env = dict(environ)
    if "MLFLOW_DISABLE_TELEMETRY" not in env and "DO_NOT_TRACK" not in env:
        env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    return env


class MlflowWriter:
    """Sends trial records to a writer process (`python -m ciq_tune.tracking`) that writes
    them to MLflow (`serve`: a finished trial is three MLflow calls, whatever its number of
    parameters and metrics).

    The search only writes a JSON line to a pipe per event; importing MLflow, opening the store
    and every MLflow call happen in the other process, off the Tune loop and its GIL. `close`
    waits until the writer reports every event written, so no record is lost; the writer's
    own exit (1.3 s of interpreter teardown on the 2-core VM) is not waited for. An error is
    raised to the caller once: `send` raises it, and `close` after that does not again.

    Args:
        tracking_uri: MLflow store.
        experiment_name: experiment holding the runs (created with `artifact_dir` if new).
        artifact_dir: folder of a new experiment's artifacts.
    """

    def __init__(self, tracking_uri: str, experiment_name: str, artifact_dir: Path) -> None:
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.artifact_dir = artifact_dir
        self.error: str | None = None
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._warned: set[str] = set()
        self._written = False  # the writer replied "done": every event is in the store
        self._raised = False  # `error` has been raised to the caller

    def start(self) -> None:
        """Start the writer process (it imports MLflow and opens the store)."""
        command = [
            sys.executable,
            "-m",
            "ciq_tune.tracking",
            "--uri",
            self.tracking_uri,
            "--experiment",
            self.experiment_name,
            "--artifacts",
            str(self.artifact_dir),
        ]
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=writer_environment(os.environ),
            # Its own session: Ctrl-C in the terminal goes to the search, which stops and
            # closes the pipe; the writer then writes what it has, instead of dying with it.
            start_new_session=True,
        )
        # The lowest CPU priority: its ~3 s of CPU to import MLflow and open the store, and
        # ~20 ms per trial, run on cores the search leaves idle instead of delaying Ray's start
        # and the trials; `close` gives its session a fair share back. Linux with autogroup
        # scheduling shares the CPU between sessions first, so the writer's own session gets
        # the same niceness. A writer that already exited is reported by `send`/`close`, not
        # here.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, self._process.pid, WRITER_NICENESS)
        set_session_niceness(self._process.pid, WRITER_NICENESS)
        self._reader = threading.Thread(target=self._read_replies, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        """The writer process's id (None before `start`)."""
        return None if self._process is None else self._process.pid

    def send(self, event: Mapping[str, Any]) -> None:
        """Queue one event; raises `TrackingUnavailable` once the writer has given up."""
        self._raise_if_failed()
        process = self._process
        if process is None or process.stdin is None:
            raise TrackingUnavailable("the MLflow writer was not started (setup was not called)")
        try:
            process.stdin.write(json.dumps(event, default=str) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            self.close()  # the writer died: collect its reason
            self._raised = True
            raise TrackingUnavailable(self.error or f"the MLflow writer exited ({exc})") from exc

    def close(self) -> None:
        """Wait until every event is written; raises `TrackingUnavailable` if the writer
        failed."""
        process = self._process
        if process is not None and process.poll() is None:
            # The search only waits from here on: at niceness 19 on a node that other work
            # keeps busy, the writer's session got ~10 ms of CPU per 10 s and this wait lasted
            # tens of minutes (docs/benchmarks.md, "Throughput and campaigns"). The
            # process keeps its own niceness (an unprivileged one cannot lower it), alone in its
            # session.
            set_session_niceness(process.pid, 0)
        if process is not None and process.stdin is not None and not process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
        if self._reader is not None:
            self._reader.join()  # until "done" or the writer's end
        if process is not None:
            if self._written:
                # Reaped in the background while its interpreter tears down.
                threading.Thread(target=process.wait, daemon=True).start()
            else:
                process.wait()
                if self.error is None:
                    self.error = (
                        f"the MLflow writer exited (status {process.returncode}) before "
                        "writing every event"
                    )
        if not self._raised:
            self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            self._raised = True
            raise TrackingUnavailable(self.error)

    def _read_replies(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            kind, _, message = line.rstrip("\n").partition(" ")
            if kind == "done":
                self._written = True
                return
            if kind == "error":
                self.error = message
            elif kind == "warn":
                what = message.split(":", 1)[0]
                if what not in self._warned:  # once per kind of event, not per trial
                    self._warned.add(what)
                    logger.warning("tracking: writing %s (further failures not repeated)", message)


def mlflow_writer(
    config: TrackingConfig, *, run_dir: str | Path, search_name: str
) -> MlflowWriter | None:
    """The writer of a search's MLflow runs (not started), None unless `config.backend` is
    "mlflow": into `config.tracking_uri` (default `<run_dir>/mlflow.db`), experiment
    `config.experiment_name` (default `search_name`), artifacts under `<run_dir>/mlartifacts`."""
    if config.backend != "mlflow":
        return None
    run_dir = Path(run_dir)
    return MlflowWriter(
        config.tracking_uri or sqlite_uri(run_dir),
        config.experiment_name or search_name,
        run_dir / ARTIFACTS_DIR,
    )


@contextlib.contextmanager
def background_writer(
    config: TrackingConfig, *, run_dir: str | Path, search_name: str
) -> Iterator[MlflowWriter | None]:
    """A started `mlflow_writer` for a whole command: started on entry, so that its `import
    mlflow` and the opening of the store overlap the command's own start (Ray's), and closed on
    exit, Ctrl+C included, once every record is written, so that the backlog overlaps what the
    command does after the search. A failure is a warning: tracking is a convenience."""
    writer = mlflow_writer(config, run_dir=run_dir, search_name=search_name)
    if writer is not None:
        writer.start()
    try:
        yield writer
    finally:
        if writer is not None:
            try:
                writer.close()
            except TrackingUnavailable as exc:
                logger.warning("tracking is off for this search: %s", exc)


class EvaluationTracker:
    """Records a search's evaluations one by one, without Ray Tune: each as an MLflow run
    through a started `MlflowWriter`, or as a log line. A tracking failure is one warning,
    after which tracking is off: it never stops the search.

    Args:
        config: The tracking settings (`backend` "mlflow", "log" or "none").
        writer: The started writer when `backend` is "mlflow" (None: nothing is written).
        search_name: Tagged on every run.
    """

    def __init__(
        self, config: TrackingConfig, writer: MlflowWriter | None, search_name: str
    ) -> None:
        self.config = config
        self.writer = writer if config.backend == "mlflow" else None
        self.tags = search_tags(search_name, config.tags)

    def record(self, evaluation: int, config: Any, metrics: Mapping[str, Any], *, ok: bool) -> None:
        """One evaluation: its configuration, its numeric metrics, its ``error`` text."""
        from ciq_tune.results import flatten_config

        if self.config.backend == "log":
            logger.info("evaluation %d config=%s result=%s", evaluation, config, dict(metrics))
        if self.writer is None:
            return
        key = str(evaluation)
        numbers = {
            k: float(v)
            for k, v in metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        error = metrics.get("error")
        try:
            self.writer.send(
                {
                    "kind": "start",
                    "trial": key,
                    "name": f"evaluation_{key}",
                    "tags": self.tags,
                    "params": flatten_config(config),
                }
            )
            self.writer.send({"kind": "metrics", "trial": key, "metrics": numbers, "step": 1})
            if isinstance(error, str) and error:
                self.writer.send({"kind": "texts", "trial": key, "texts": {"error": error}})
            status = "FINISHED" if ok else "FAILED"
            self.writer.send({"kind": "end", "trial": key, "status": status})
        except TrackingUnavailable as exc:
            logger.warning("tracking is off for this search: %s", exc)
            self.writer = None


# How long the writer gathers events after the first one of a batch (seconds): a trial's start,
# result and end that arrive within it are written together, 3 MLflow calls instead of 4 and
# more; a run shows up in MLflow at most this much later.
BATCH_WINDOW_S = 1.0


def serve(
    tracking_uri: str, experiment_name: str, artifact_dir: Path, events: IO[str], replies: IO[str]
) -> int:
    """The writer loop: one JSON event per line of `events` until it closes; replies
    "error <why>" (store unusable, exit 1), "warn <step>: <why>" (one record lost) and, once
    every event is written, "done".

    Events are read in a thread while the loop writes: whatever has arrived, or arrives within
    `BATCH_WINDOW_S` of a batch's first event, is written trial by trial with as few MLflow
    calls as the events allow (`_write_trial`)."""
    lines: queue.Queue[tuple[float, str | None]] = queue.Queue()  # (arrival, line; None: end)

    def read() -> None:
        for line in events:
            lines.put((time.monotonic(), line))
        lines.put((time.monotonic(), None))

    # Reading starts first so that the sender never blocks on a full pipe while MLflow is
    # imported and the store opened (seconds).
    threading.Thread(target=read, daemon=True).start()
    try:
        from mlflow import MlflowClient

        prepare_sqlite_store(tracking_uri)
        sync_sqlite_at_checkpoints()
        client = MlflowClient(tracking_uri=tracking_uri)
        experiment_id = ensure_experiment(tracking_uri, experiment_name, artifact_dir)
    except Exception as exc:
        replies.write(f"error {type(exc).__name__}: {exc}\n")
        replies.flush()
        return 1
    runs: dict[str, str] = {}
    closed = False
    while not closed:
        batch, closed = _next_batch(lines)
        by_trial: dict[str, list[dict]] = {}
        for line in batch:
            event = json.loads(line)
            by_trial.setdefault(str(event.get("trial")), []).append(event)
        for key, trial_events in by_trial.items():
            for step, failure in _write_trial(client, experiment_id, runs, key, trial_events):
                replies.write(f"warn {step}: {type(failure).__name__}: {failure}\n")
                replies.flush()
    replies.write("done\n")
    replies.flush()
    return 0


def _next_batch(lines: queue.Queue[tuple[float, str | None]]) -> tuple[list[str], bool]:
    """The next line (waited for), every line already there, and those that arrive within
    `BATCH_WINDOW_S` of the next one's arrival (a writer that is behind does not wait), and
    whether the events have ended."""
    batch: list[str] = []
    arrived, line = lines.get()
    until = arrived + BATCH_WINDOW_S
    while line is not None:
        batch.append(line)
        try:
            _, line = lines.get(timeout=max(0.0, until - time.monotonic()))
        except queue.Empty:
            return batch, False
    return batch, True


def mlflow_name(key: str) -> str:
    """A result key as an MLflow metric name, which allows no ``@``: a matrix's per-shape
    ``time_ms@3`` is ``time_ms/shape3``."""
    return key.replace("@", "/shape")


def _write_trial(
    client: Any, experiment_id: str, runs: dict[str, str], key: str, events: list[dict]
) -> list[tuple[str, Exception]]:
    """Write one trial's events of a batch: `create_run` (with its tags and start time) if it
    starts here, one `log_batch` of its parameters, metrics and tags, its texts and files, and
    `set_terminated` (with its end time) if it ends here. Returns the steps that failed; the
    others are still written."""
    from mlflow.entities import Metric
    from mlflow.entities import Param
    from mlflow.entities import RunTag

    failed: list[tuple[str, Exception]] = []
    params: list[Param] = []
    metrics: list[Metric] = []
    tags: list[RunTag] = []
    texts: dict[str, str] = {}
    files: list[str] = []
    end: dict | None = None
    for event in events:
        kind = event.get("kind")
        if kind == "start":
            try:
                run = client.create_run(
                    experiment_id,
                    run_name=event["name"],
                    start_time=event.get("time_ms"),
                    tags=dict(event.get("tags") or {}),
                )
                runs[key] = run.info.run_id
            except Exception as exc:
                failed.append(("start", exc))
            params += [Param(k, str(v)[:MAX_PARAM_CHARS]) for k, v in event["params"].items()]
        elif kind == "metrics":
            stamp = int(event.get("time_ms") or time.time() * 1000)
            metrics += [
                Metric(mlflow_name(k), v, stamp, event["step"]) for k, v in event["metrics"].items()
            ]
        elif kind == "tags":
            tags += [RunTag(k, str(v)) for k, v in event["tags"].items()]
        elif kind == "texts":
            texts.update(event["texts"])
        elif kind == "files":
            files += event["files"]
        elif kind == "end":
            end = event
        else:
            failed.append((str(kind), ValueError(f"unknown event kind {kind!r}")))

    run_id = runs.get(key)
    if run_id is None:  # its start failed or never came: nothing of it can be written
        kinds = [str(e.get("kind")) for e in events if e.get("kind") != "start"]
        if kinds:
            failed.append((kinds[0], KeyError(f"trial {key!r} has no run")))
        return failed
    try:
        _log_batches(client, run_id, params, metrics, tags)
    except Exception as exc:
        failed.append(("records", exc))
    for name, text in texts.items():
        try:
            client.log_text(run_id, text, f"{name}.txt")
        except Exception as exc:
            failed.append(("texts", exc))
    for path in files:
        try:
            if Path(path).is_file():
                client.log_artifact(run_id, path)
        except Exception as exc:
            failed.append(("files", exc))
    if end is not None:
        try:
            client.set_terminated(run_id, status=end["status"], end_time=end.get("time_ms"))
        except Exception as exc:
            failed.append(("end", exc))
        runs.pop(key)
    return failed


# MLflow's limits on one `log_batch` call: parameters, tags, and entries of all three kinds.
_BATCH_PARAMS, _BATCH_TAGS, _BATCH_ENTRIES = 100, 100, 1000


def _log_batches(client: Any, run_id: str, params: list, metrics: list, tags: list) -> None:
    """`log_batch` calls within MLflow's limits: one for a trial's usual few records."""
    while params or metrics or tags:
        p, params = params[:_BATCH_PARAMS], params[_BATCH_PARAMS:]
        t, tags = tags[:_BATCH_TAGS], tags[_BATCH_TAGS:]
        room = _BATCH_ENTRIES - len(p) - len(t)
        m, metrics = metrics[:room], metrics[room:]
        client.log_batch(run_id, metrics=m, params=p, tags=t)


def _main() -> int:
    parser = argparse.ArgumentParser(description="ciq-tune's background MLflow writer")
    parser.add_argument("--uri", required=True)
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--artifacts", type=Path, required=True)
    args = parser.parse_args()
    return serve(args.uri, args.experiment, args.artifacts, sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(_main())
