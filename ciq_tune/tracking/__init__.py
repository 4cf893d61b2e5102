"""Experiment tracking: where a search records its trials (`TrackingConfig`), the MLflow store,
and the background writer that keeps MLflow off the search's path. MLflow is imported only when
used (by the writer, in its own process).

- `config`: the settings, the embedded store's address, the tags of a search's runs.
- `store`: a new sqlite store made fast to write, experiments, a search's runs read back.
- `writer`: the search's side (`MlflowWriter`, `background_writer`, `EvaluationTracker`).
- `writer_process`: the writer process, ``python -m ciq_tune.tracking``.
"""

from ciq_tune.tracking.config import ARTIFACTS_DIR
from ciq_tune.tracking.config import DB_NAME
from ciq_tune.tracking.config import SEARCH_TAG
from ciq_tune.tracking.config import TrackingConfig
from ciq_tune.tracking.config import search_tags
from ciq_tune.tracking.config import sqlite_uri
from ciq_tune.tracking.store import ensure_experiment
from ciq_tune.tracking.store import prepare_sqlite_store
from ciq_tune.tracking.store import trial_runs
from ciq_tune.tracking.writer import EvaluationTracker
from ciq_tune.tracking.writer import MlflowWriter
from ciq_tune.tracking.writer import TrackingUnavailable
from ciq_tune.tracking.writer import background_writer
from ciq_tune.tracking.writer import mlflow_writer

__all__ = [
    "ARTIFACTS_DIR",
    "DB_NAME",
    "SEARCH_TAG",
    "EvaluationTracker",
    "MlflowWriter",
    "TrackingConfig",
    "TrackingUnavailable",
    "background_writer",
    "ensure_experiment",
    "mlflow_writer",
    "prepare_sqlite_store",
    "search_tags",
    "sqlite_uri",
    "trial_runs",
]
