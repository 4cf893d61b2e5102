"""Transfer from an earlier search: its best configurations that fit are evaluated first."""

from __future__ import annotations

import pytest

import ciq_tune.space as ss
from ciq_tune.engine import Budget
from ciq_tune.engine import Engine
from ciq_tune.engine import Objective
from ciq_tune.engine import SearchResults
from ciq_tune.engine import create_engine
from ciq_tune.engine.transfer import transfer_genes
from tests.engine.conftest import TOY_SPACE
from tests.engine.conftest import drive
from tests.engine.conftest import toy


def _earlier(space, objective, n: int = 40, seed: int = 3) -> SearchResults:
    engine = create_engine("screened", space, "score", budget=Budget(max_evaluations=n), seed=seed)
    drive(engine, objective)
    return engine.result()


def test_best_configurations_that_fit_come_first_without_repeats() -> None:
    # The earlier search had a wider x and no constraint; here x <= 10 and x * y <= 12.
    wide = {"x": ss.range(1.0, 20.0, 0.5), "y": ss.choice([1, 2, 3])}
    earlier = _earlier(wide, lambda c: (c["x"] - 9) ** 2 + c["y"])
    narrow = ss.SearchSpace(
        {"x": ss.range(1.0, 10.0, 0.5), "y": ss.choice([1, 2, 3])}, constraints=["x * y <= 12"]
    )
    genes = transfer_genes(earlier, narrow, limit=4)
    configs = [narrow.decode(g) for g in genes]
    fitting = [
        r.config
        for r in earlier.best(len(earlier.ok_records))
        if r.config["x"] <= 10 and r.config["x"] * r.config["y"] <= 12
    ]
    assert configs == fitting[:4]
    assert len(set(genes)) == 4
    assert transfer_genes(earlier, narrow, limit=4, exclude=genes[:1]) == (
        [*genes[1:], narrow.encode(fitting[4])]
    )


def test_parameters_the_earlier_space_lacked_take_their_defaults() -> None:
    earlier = _earlier({"x": ss.range(1.0, 20.0, 0.5)}, lambda c: (c["x"] - 4) ** 2)
    more = {"x": ss.range(1.0, 20.0, 0.5), "y": ss.choice([2, 1, 3])}
    first = transfer_genes(earlier, ss.SearchSpace(more), limit=1)
    assert ss.SearchSpace(more).decode(first[0]) == {"x": 4.0, "y": 2}


def test_failed_evaluations_are_never_transferred() -> None:
    earlier = _earlier(TOY_SPACE, lambda c: None if c["x"] < 5 else toy(c))
    genes = transfer_genes(earlier, ss.SearchSpace(TOY_SPACE), limit=100)
    ok = {r.config["x"] for r in earlier.ok_records}
    assert genes and all(ss.SearchSpace(TOY_SPACE).decode(g)["x"] in ok for g in genes)
    assert len(genes) == len({r.key for r in earlier.ok_records})


@pytest.mark.parametrize("strategy", ["screened", "ga", "nsga2", "random"])
def test_engine_evaluates_them_after_the_initial_points_and_keeps_them_in_its_state(
    strategy: str,
) -> None:
    earlier = _earlier(TOY_SPACE, lambda c: (c["x"] - 7) ** 2 + c["y"])
    objectives = ["score"] if strategy != "nsga2" else [Objective(name="score"), "other"]
    engine = create_engine(
        strategy,
        TOY_SPACE,
        objectives,
        seed=0,
        initial_points=[{"x": 2.0, "y": 1}],
        transfer_from=earlier,
        config={"transfer_points": 3},
    )
    expected = [r.config for r in earlier.best(3)]
    restored = Engine.from_state(engine.get_state())
    for e in (engine, restored):
        first = [e.ask() for _ in range(4)]
        assert [c.origin for c in first] == ["initial", "transfer", "transfer", "transfer"]
        assert [c.config for c in first[1:]] == expected
