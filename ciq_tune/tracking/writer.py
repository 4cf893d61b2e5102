"""The search's side of tracking: `MlflowWriter` sends trial records to the writer process
(`ciq_tune.tracking.writer_process`) so that a search never waits for the store, and
`EvaluationTracker` records a search's evaluations without Ray Tune."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ciq_tune.tracking.config import ARTIFACTS_DIR
from ciq_tune.tracking.config import TrackingConfig
from ciq_tune.tracking.config import search_tags
from ciq_tune.tracking.config import sqlite_uri

logger = logging.getLogger("ciq_tune.tracking")


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
