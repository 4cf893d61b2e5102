"""Ray Tune callbacks that track a search (MLflow or plain logging) and never break it."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ray.tune import Callback
from ray.tune.utils import flatten_dict

from ciq_tune.tracking import MlflowWriter
from ciq_tune.tracking import TrackingConfig
from ciq_tune.tracking import TrackingUnavailable
from ciq_tune.tracking import mlflow_writer
from ciq_tune.tracking import search_tags

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
            if hook == "setup" or isinstance(exc, TrackingUnavailable):
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


class MLflowTrackingCallback(Callback):
    """One MLflow run per trial, written in the background (`ciq_tune.tracking.MlflowWriter`).

    Each run has the trial's configuration as parameters (nested keys joined with "/"), its
    numeric results as metrics (step: the training iteration), the text of
    `config.artifact_keys` results (compile log, error) as `<key>.txt`, the files named by
    `config.artifact_path_keys` results (controls file) and the trial folder's files matching
    `config.artifact_globs`; runs start and end at the trial's own times. The Tune loop only
    hands each event to the writer process, so a search neither waits for the store nor gets
    Ray's "may be a performance bottleneck" warnings.

    Args:
        writer: the writer (not started): `setup` starts it and `on_experiment_end` waits until
            everything is written.
        tags: tags of every run.
        config: which results and files become artifacts.
        started_writer: a writer that its caller started and closes (instead of `writer`), as
            `ciq-tune tune` does so that MLflow's start and the backlog overlap its own work.
    """

    def __init__(
        self,
        writer: MlflowWriter | None = None,
        *,
        tags: dict[str, str],
        config: TrackingConfig,
        started_writer: MlflowWriter | None = None,
    ) -> None:
        if (writer is None) == (started_writer is None):
            raise ValueError("give `writer` or `started_writer`, not both or neither")
        self.tags = tags
        self.config = config
        self._own_writer = writer
        self._writer = started_writer
        self._started: set[str] = set()
        self._artifacts: dict[str, dict[str, str]] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles the run config before `setup`; a live writer process is not state.
        return {**self.__dict__, "_writer": None, "_own_writer": None}

    def setup(
        self,
        stop: Any = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        if self._own_writer is not None:
            self._writer = self._own_writer
            self._writer.start()

    def _send(self, event: dict[str, Any]) -> None:
        if self._writer is None:
            raise TrackingUnavailable("setup was not called")
        self._writer.send(event)

    def _start(self, trial: Trial) -> None:
        if trial.trial_id in self._started:
            return
        self._started.add(trial.trial_id)
        self._send(
            {
                "kind": "start",
                "trial": trial.trial_id,
                "time_ms": _now_ms(),
                "name": str(trial),
                "tags": {**self.tags, "trial_name": str(trial)},
                "params": flatten_dict(trial.config or {}, delimiter="/"),
            }
        )

    def on_trial_start(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        self._start(trial)

    def on_trial_result(
        self, iteration: int, trials: list, trial: Trial, result: dict, **info: Any
    ) -> None:
        self._start(trial)  # a restored trial reports without starting again
        flat = flatten_dict(result, delimiter="/")
        metrics = {
            k: float(v)
            for k, v in flat.items()
            if isinstance(v, int | float) and not k.startswith("config/")
        }
        step = int(result.get("training_iteration") or 0)
        self._send(
            {
                "kind": "metrics",
                "trial": trial.trial_id,
                "time_ms": _now_ms(),
                "metrics": metrics,
                "step": step,
            }
        )
        keys = (*self.config.artifact_keys, *self.config.artifact_path_keys)
        found = {k: result[k] for k in keys if isinstance(result.get(k), str) and result[k]}
        self._artifacts.setdefault(trial.trial_id, {}).update(found)

    def on_trial_complete(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        self._end(trial, failed=False)

    def on_trial_error(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        self._end(trial, failed=True)

    def _end(self, trial: Trial, *, failed: bool) -> None:
        self._start(trial)
        found = self._artifacts.pop(trial.trial_id, {})
        texts = {k: found[k] for k in self.config.artifact_keys if k in found}
        files = [found[k] for k in self.config.artifact_path_keys if k in found]
        folder = Path(trial.local_path) if trial.local_path else None
        if folder is not None and folder.is_dir():
            for pattern in self.config.artifact_globs:
                files += [str(p) for p in sorted(folder.glob(pattern))]
        if texts:
            self._send({"kind": "texts", "trial": trial.trial_id, "texts": texts})
        if files:
            self._send({"kind": "files", "trial": trial.trial_id, "files": files})
        status = "FAILED" if failed else "FINISHED"
        self._send({"kind": "end", "trial": trial.trial_id, "time_ms": _now_ms(), "status": status})

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if self._own_writer is not None and self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()


def _now_ms() -> int:
    return int(time.time() * 1000)


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
    config: TrackingConfig | None,
    *,
    run_dir: str | Path,
    search_name: str,
    started_writer: MlflowWriter | None = None,
) -> list[Callback]:
    """The callbacks for `tune.RunConfig(callbacks=…)` of a search, each wrapped in
    `SafeCallback` so that tracking failures are warnings.

    Args:
        config: tracking settings (default: MLflow into `<run_dir>/mlflow.db`).
        run_dir: the search's output folder (store and artifacts go there by default).
        search_name: the experiment name unless `config` sets one; tagged on every run.
        started_writer: with MLflow, a writer its caller started and closes
            (`ciq_tune.tracking.background_writer`); default: the callback's own, started at
            the experiment's start and closed at its end.

    Example:
        >>> callbacks = tracking_callbacks(None, run_dir="out", search_name="matmul")
        >>> tune.Tuner(trainable, run_config=tune.RunConfig(callbacks=callbacks)).fit()
    """
    config = config or TrackingConfig()
    if config.backend == "none":
        return []
    if config.backend == "log":
        return [SafeCallback(LoggingCallback())]
    inner = MLflowTrackingCallback(
        None if started_writer else mlflow_writer(config, run_dir=run_dir, search_name=search_name),
        tags=search_tags(search_name, config.tags),
        config=config,
        started_writer=started_writer,
    )
    return [SafeCallback(inner)]
