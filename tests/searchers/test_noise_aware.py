"""`searchers.noise_aware` in this process's Ray: a near-best result is confirmed by more rounds
and reported as their median; the stopper ends the search once nothing beats the best."""

from __future__ import annotations

from typing import Any

import pytest

from searchers.noise_aware import noise_aware


class Rounds:
    """A trainable whose successive calls per configuration return the listed values."""

    def __init__(self, values: dict[int, list[float]]) -> None:
        self.values = {k: list(v) for k, v in values.items()}
        self.calls: list[int] = []

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(config["x"])
        return {"status": "ok", "time_ms": self.values[config["x"]].pop(0)}


@pytest.mark.slow
def test_a_near_best_result_is_confirmed_and_reported_as_the_median(ray_cluster: None) -> None:
    rounds = Rounds({0: [1.0, 1.1, 0.95], 1: [0.9, 1.2, 1.3], 2: [5.0]})
    trial, stopper = noise_aware(rounds, metric="time_ms", mode="min", confirm_rounds=2)
    first = trial({"x": 0})  # the first result is the best so far: confirmed
    assert first["search_rounds"] == 3 and first["time_ms"] == 1.0
    lucky = trial({"x": 1})  # 0.9 looks best, but its confirmation rounds say 1.2
    assert lucky["first_round"] == 0.9 and lucky["time_ms"] == 1.2 and lucky["search_rounds"] == 3
    far = trial({"x": 2})  # far from the best: one round, not confirmed
    assert far["search_rounds"] == 1 and far["time_ms"] == 5.0 and "first_round" not in far
    assert rounds.calls == [0, 0, 0, 1, 1, 1, 2]
    assert not stopper.stop_all()


@pytest.mark.slow
def test_the_stopper_ends_the_search_after_patience_without_progress(ray_cluster: None) -> None:
    values = {i: [2.0 if i else 1.0] for i in range(6)}
    trial, stopper = noise_aware(
        Rounds(values), metric="time_ms", mode="min", confirm_rounds=0, patience=3
    )
    trial({"x": 0})
    for i in range(1, 3):
        trial({"x": i})
        assert not stopper.stop_all()
    trial({"x": 3})  # the third evaluation in a row without beating 1.0 beyond the noise
    assert stopper.stop_all()
