"""The screened strategy's process is refitted only when a result was told since the last fit:
asks between two results (a local search refilling several free slots) reuse it, and the
proposals are the same as with a fit per ask."""

from __future__ import annotations

import random

import ciq_tune.space as ss
from ciq_tune.engine import Budget
from ciq_tune.engine import create_engine
from ciq_tune.engine.screened import ScreenedGA
from ciq_tune.results import Objective
from ciq_tune.space import SearchSpace


def _proposals(monkeypatch, *, refit_every_ask: bool) -> tuple[list[dict], int]:
    fits = 0
    fit, hyperparameters = ScreenedGA._fit_hyperparameters, ScreenedGA._process_hyperparameters

    def counted(self, *args):
        nonlocal fits
        fits += 1
        return fit(self, *args)

    def forgetting(self, *args):
        self._hyperparameters_told = None
        return hyperparameters(self, *args)

    monkeypatch.setattr(ScreenedGA, "_fit_hyperparameters", counted)
    if refit_every_ask:
        monkeypatch.setattr(ScreenedGA, "_process_hyperparameters", forgetting)
    space = SearchSpace({f"p{i}": ss.choice([1, 2, 4, 8, 16, 32]) for i in range(4)})
    engine = create_engine(
        "screened",
        space,
        [Objective(name="t", mode="min")],
        config={"steady_state": True},
        budget=Budget(max_evaluations=60),
        seed=3,
    )
    rng = random.Random(0)
    asked, pending = [], []
    while True:
        while len(pending) < 6 and (candidate := engine.ask()) is not None:
            pending.append(candidate)
            asked.append(candidate.config)
        if not pending:
            return asked, fits
        for _ in range(min(3, len(pending))):  # three results, then three asks
            c = pending.pop(0)
            value = sum(abs(v - 4) for v in c.config.values()) + rng.random()
            engine.tell(c.id, {"t": value}, status="ok", info={})


def test_asks_between_two_results_reuse_the_fit(monkeypatch) -> None:
    reused, fits = _proposals(monkeypatch, refit_every_ask=False)
    monkeypatch.undo()
    every, fits_every = _proposals(monkeypatch, refit_every_ask=True)
    assert reused == every
    assert fits < fits_every, (fits, fits_every)
