"""The writer process (`python -m ciq_tune.tracking`): it reads one JSON event per line on stdin
(`MlflowWriter` sends them) and writes them to MLflow, batching a trial's events into as few
MLflow calls as they allow."""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from pathlib import Path
from typing import IO
from typing import Any

from ciq_tune.tracking.store import ensure_experiment
from ciq_tune.tracking.store import prepare_sqlite_store
from ciq_tune.tracking.store import sync_sqlite_at_checkpoints

# MLflow's limit on a parameter value's length (characters); longer values are cut.
MAX_PARAM_CHARS = 6000


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


def main() -> int:
    """The writer process's entry point: `serve` on stdin and stdout."""
    parser = argparse.ArgumentParser(description="ciq-tune's background MLflow writer")
    parser.add_argument("--uri", required=True)
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--artifacts", type=Path, required=True)
    args = parser.parse_args()
    return serve(args.uri, args.experiment, args.artifacts, sys.stdin, sys.stdout)
