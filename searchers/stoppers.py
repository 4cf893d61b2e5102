"""Ray Tune stoppers: `FirstPoolFailed` ends a search whose first pool of results all failed."""

from __future__ import annotations

from typing import Any

from ray.tune import Stopper

from ciq_tune.results import OK


class FirstPoolFailed(Stopper):
    """A Ray Tune stopper that ends the experiment when the first `pool_size` results all
    failed (`exit_on_failure`)."""

    def __init__(self, pool_size: int, *, enabled: bool) -> None:
        self.pool_size = pool_size
        self.enabled = enabled
        self.seen: set[str] = set()
        self.failed = 0
        self.first_error: str | None = None
        self.tripped = False

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        # A function trial may report its final result twice; count each trial once.
        if "status" not in result or trial_id in self.seen:
            return False
        self.seen.add(trial_id)
        if result["status"] != OK:
            self.failed += 1
            self.first_error = self.first_error or f"{result['status']}: {result.get('error')}"
        if self.enabled and len(self.seen) == self.pool_size and self.failed == self.pool_size:
            self.tripped = True
        return False

    def stop_all(self) -> bool:
        return self.tripped
