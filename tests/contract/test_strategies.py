"""The engine contract (`engine_contract.py`) run against every registered strategy."""

from __future__ import annotations

import pytest

from ciq_tune.engine import STRATEGIES
from tests.contract.engine_contract import EngineContract


# Not `exhaustive`: it lists spaces of listed values only (this space has a continuous
# parameter) and its sequence ignores the seed; tests/engine/test_exhaustive.py checks the
# contract's points for it on a listed space.
@pytest.fixture(params=sorted(set(STRATEGIES) - {"exhaustive"}))
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class TestEveryStrategy(EngineContract):
    pass
