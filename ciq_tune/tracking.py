"""Experiment tracking settings and MLflow helpers; MLflow is imported only when used."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

if TYPE_CHECKING:
    import pandas as pd

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
    from ciq_tune import __version__

    return {SEARCH_TAG: search_name, "ciq_tune.version": __version__, **dict(extra or {})}


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
