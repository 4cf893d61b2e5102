"""The MLflow store: a new sqlite store made fast to write, experiments, a search's runs read
back. MLflow is imported only when a function is called."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.tracking.config import SEARCH_TAG

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger("ciq_tune.tracking")


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
