"""`LocalRun`: the ask/tell loop's own time is measured (`engine_s`), the one thread every
result waits on."""

from __future__ import annotations

import time
from typing import Any

from ciq_tune.engine.local_run import LocalRun
from ciq_tune.engine.proposals import Candidate


class SlowEngine:
    """Hands out `n` candidates, each ask taking `ask_s`."""

    def __init__(self, n: int, ask_s: float) -> None:
        self.left, self.ask_s, self.pending = n, ask_s, []
        self.told: list[int] = []

    def ask(self) -> Candidate | None:
        time.sleep(self.ask_s)
        if self.left == 0:
            return None
        self.left -= 1
        return Candidate(self.left, {"x": self.left}, (), 0, str(self.left), "design")  # type: ignore[arg-type]


def test_the_time_in_the_engine_is_measured() -> None:
    engine = SlowEngine(n=6, ask_s=0.02)

    def tell(candidate: Candidate, outcome: Any) -> None:
        time.sleep(0.01)
        engine.told.append(candidate.id)

    run: LocalRun[Any] = LocalRun(
        engine,  # type: ignore[arg-type]
        lambda config: config["x"],
        workers=2,
        isolated=True,
        tell=tell,
        crash=lambda why: None,
    )
    run.run()
    assert sorted(engine.told) == list(range(6))
    # 7 asks (the last finds the budget spent) and 6 tells, on the loop's thread.
    assert 7 * 0.02 + 6 * 0.01 <= run.engine_s <= run.wall_s
