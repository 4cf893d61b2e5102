"""Noise-aware kernel search on Ray Tune: a confirmed best and a convergence stop.

`noise_aware` wraps a kernel trainable: a result within noise of the search's best is
re-measured (`confirm_rounds` more evaluations of the same configuration, each one round of the
measurement protocol) and reported as the median of its rounds, so the search's best value is
not the luckiest single round. `ConvergenceStopper` ends the search when nothing has beaten the
best by more than the noise for `patience` evaluations. The rules are
`ciq_tune.validation.noise_aware.NoiseAwareBest`; the best lives in a small Ray actor that the
trials and the stopper share.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import ray
from ray import tune

from ciq_tune.validation.noise_aware import CONFIRM_ROUNDS
from ciq_tune.validation.noise_aware import NOISE
from ciq_tune.validation.noise_aware import PATIENCE
from ciq_tune.validation.noise_aware import NoiseAwareBest
from ciq_tune.validation.noise_aware import confirmed

Trainable = Callable[[dict[str, Any]], dict[str, Any]]


@ray.remote(num_cpus=0)
class _Incumbent:
    """The search's `NoiseAwareBest`, shared by its trials and its stopper."""

    def __init__(self, mode: str, noise: float, patience: int) -> None:
        self.best = NoiseAwareBest(mode=mode, noise=noise, patience=patience)  # type: ignore[arg-type]

    def near_best(self, value: float) -> bool:
        return self.best.near_best(value)

    def record(self, value: float) -> bool:
        return self.best.record(value)

    def converged(self) -> bool:
        return self.best.converged


class _ActorIncumbent:
    """The `Incumbent` of trials on a Ray cluster: the `_Incumbent` actor's answers."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def near_best(self, value: float) -> bool:
        return bool(ray.get(self.actor.near_best.remote(value)))

    def record(self, value: float) -> bool:
        return bool(ray.get(self.actor.record.remote(value)))


class ConvergenceStopper(tune.Stopper):
    """Stops the whole search once the shared `NoiseAwareBest` has converged."""

    def __init__(self, incumbent: Any) -> None:
        self._incumbent = incumbent

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return bool(ray.get(self._incumbent.converged.remote()))


def noise_aware(
    trainable: Trainable,
    *,
    metric: str,
    mode: str,
    noise: float = NOISE,
    confirm_rounds: int = CONFIRM_ROUNDS,
    patience: int = PATIENCE,
) -> tuple[Trainable, ConvergenceStopper]:
    """Wrap a kernel trainable (call after `ray.init`): confirmed best, convergence stop.

    Args:
        trainable: ``trainable(config) -> result`` (`objectives.make_trainable`).
        metric: The result key searched.
        mode: "min" or "max".
        noise: Relative noise of one round.
        confirm_rounds: Extra rounds of a candidate within `noise` of the best (0: none).
        patience: Evaluations without a beyond-noise improvement before stopping (0: never).

    Returns:
        The wrapped trainable (its results carry ``search_rounds`` and, when confirmed,
        ``first_round``) and the stopper to pass to the Tuner's RunConfig.
    """
    if confirm_rounds < 0:
        raise ValueError(f"`confirm_rounds` must be >= 0, got confirm_rounds={confirm_rounds}")
    incumbent = _Incumbent.remote(mode, noise, patience)  # type: ignore[attr-defined]
    wrapped = functools.partial(
        confirmed, trainable, metric, _ActorIncumbent(incumbent), confirm_rounds
    )
    name = getattr(trainable, "__name__", None)
    if name:
        wrapped.__name__ = name  # type: ignore[attr-defined]
    return wrapped, ConvergenceStopper(incumbent)
