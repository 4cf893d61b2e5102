"""Where and how a search records its trials: the settings, the embedded store's address and
the tags that group a search's runs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

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
