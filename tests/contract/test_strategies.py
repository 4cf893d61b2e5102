"""The engine contract (`engine_contract.py`) run against every registered strategy."""

from __future__ import annotations

import pytest

from ciq_tune.engine import STRATEGIES
from tests.contract.engine_contract import EngineContract


@pytest.fixture(params=sorted(STRATEGIES))
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class TestEveryStrategy(EngineContract):
    pass
