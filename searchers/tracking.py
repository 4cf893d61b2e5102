"""Ray Tune callbacks that track a search (MLflow or plain logging) and never break it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ray.air.integrations.mlflow import MLflowLoggerCallback
from ray.tune import Callback

from ciq_tune.tracking import ARTIFACTS_DIR
from ciq_tune.tracking import TrackingConfig
from ciq_tune.tracking import ensure_experiment
from ciq_tune.tracking import search_tags
from ciq_tune.tracking import sqlite_uri

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

logger = logging.getLogger("ciq_tune.tracking")


class SafeCallback(Callback):
    """Forwards every hook to `inner`, logging its exceptions as warnings instead of raising.

    Tracking is a convenience: a bad URI, a full disk or an unreachable server must not stop
    a search that has been compiling kernels for hours. If `setup` fails the inner callback is
    switched off (its later hooks would fail too); any other failure is logged once per hook
    and the callback keeps going, so that a transient error loses one record, not the rest.

    Args:
        inner: the callback to protect.
    """

    # Ray checks that every `on_*` hook is forwarded. Ray passes hook arguments by keyword, so
    # the hooks take `**info` like Ray's own CallbackList (hence the override ignores).
    IS_CALLBACK_CONTAINER = True

    def __init__(self, inner: Callback) -> None:
        self.inner = inner
        self.disabled = False
        self._warned: set[str] = set()

    def _forward(self, hook: str, **info: Any) -> None:
        if self.disabled:
            return
        try:
            getattr(self.inner, hook)(**info)
        except Exception as exc:
            if hook == "setup":
                self.disabled = True
                logger.warning(
                    "tracking is off for this search: %s.setup failed: %s: %s",
                    type(self.inner).__name__,
                    type(exc).__name__,
                    exc,
                )
            elif hook not in self._warned:
                self._warned.add(hook)
                logger.warning(
                    "tracking: %s.%s failed (the search goes on; further failures of this "
                    "hook are not repeated): %s: %s",
                    type(self.inner).__name__,
                    hook,
                    type(exc).__name__,
                    exc,
                )

    def setup(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("setup", **info)

    def on_step_begin(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_step_begin", **info)

    def on_step_end(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_step_end", **info)

    def on_trial_start(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_trial_start", **info)

    def on_trial_restore(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_trial_restore", **info)

    def on_trial_save(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_trial_save", **info)

    def on_trial_result(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_trial_result", **info)

    def on_trial_complete(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_trial_complete", **info)

    def on_trial_recover(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_trial_recover", **info)

    def on_trial_error(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_trial_error", **info)

    def on_checkpoint(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_checkpoint", **info)

    def on_experiment_end(self, **info: Any) -> None:  # type: ignore[override]
        self._forward("on_experiment_end", **info)


class CiqMLflowLoggerCallback(MLflowLoggerCallback):
    """Ray's MLflow callback, plus the experiment's artifact folder and per-trial artifacts.

    Ray logs one run per trial (config as parameters, numeric results as metrics). This adds
    the text of `config.artifact_keys` results (compile log, error tail) as `<key>.txt`, the
    files named by `config.artifact_path_keys` results (controls file) and the trial folder's
    files matching `config.artifact_globs`.

    Args:
        tracking_uri: MLflow store.
        experiment_name: experiment holding the search's runs.
        artifact_dir: folder of the experiment's artifacts (when it is created here).
        tags: tags of every run.
        config: which results and files become artifacts.
    """

    def __init__(
        self,
        tracking_uri: str,
        *,
        experiment_name: str,
        artifact_dir: Path,
        tags: dict[str, str],
        config: TrackingConfig,
    ) -> None:
        super().__init__(tracking_uri, experiment_name=experiment_name, tags=tags)
        self._uri = tracking_uri
        self._experiment = experiment_name
        self.artifact_dir = artifact_dir
        self.config = config
        self._artifacts: dict[Trial, dict[str, Any]] = {}

    def setup(self, *args: Any, **kwargs: Any) -> None:
        ensure_experiment(self._uri, self._experiment, self.artifact_dir)
        super().setup(*args, **kwargs)

    def log_trial_result(self, iteration: int, trial: Trial, result: dict) -> None:
        super().log_trial_result(iteration, trial, result)
        keys = (*self.config.artifact_keys, *self.config.artifact_path_keys)
        found = {k: result[k] for k in keys if isinstance(result.get(k), str) and result[k]}
        self._artifacts.setdefault(trial, {}).update(found)

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=self._uri)
        run_id = self._trial_runs[trial]
        found = self._artifacts.pop(trial, {})
        for key in self.config.artifact_keys:
            if key in found:
                client.log_text(run_id, found[key], f"{key}.txt")
        for key in self.config.artifact_path_keys:
            if key in found and Path(found[key]).is_file():
                client.log_artifact(run_id, found[key])
        folder = Path(trial.local_path) if trial.local_path else None
        if folder is not None and folder.is_dir():
            for pattern in self.config.artifact_globs:
                for path in sorted(folder.glob(pattern)):
                    client.log_artifact(run_id, str(path))
        super().log_trial_end(trial, failed)


class LoggingCallback(Callback):
    """Plain tracking: one log line per result and per finished trial (logger
    `ciq_tune.tracking`, level INFO), for runs where an MLflow store is not wanted."""

    def on_trial_result(
        self, iteration: int, trials: list, trial: Trial, result: dict, **info: Any
    ) -> None:
        metrics = {k: v for k, v in result.items() if isinstance(v, int | float | str)}
        logger.info("trial %s config=%s result=%s", trial.trial_id, trial.config, metrics)

    def on_trial_complete(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        logger.info("trial %s finished", trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        logger.info("trial %s failed", trial.trial_id)


def tracking_callbacks(
    config: TrackingConfig | None, *, run_dir: str | Path, search_name: str
) -> list[Callback]:
    """The callbacks for `tune.RunConfig(callbacks=…)` of a search, each wrapped in
    `SafeCallback` so that tracking failures are warnings.

    Args:
        config: tracking settings (default: MLflow into `<run_dir>/mlflow.db`).
        run_dir: the search's output folder (store and artifacts go there by default).
        search_name: the experiment name unless `config` sets one; tagged on every run.

    Example:
        >>> callbacks = tracking_callbacks(None, run_dir="out", search_name="matmul")
        >>> tune.Tuner(trainable, run_config=tune.RunConfig(callbacks=callbacks)).fit()
    """
    config = config or TrackingConfig()
    if config.backend == "none":
        return []
    if config.backend == "log":
        return [SafeCallback(LoggingCallback())]
    run_dir = Path(run_dir)
    inner = CiqMLflowLoggerCallback(
        config.tracking_uri or sqlite_uri(run_dir),
        experiment_name=config.experiment_name or search_name,
        artifact_dir=run_dir / ARTIFACTS_DIR,
        tags=search_tags(search_name, config.tags),
        config=config,
    )
    return [SafeCallback(inner)]
