"""SearchConfiguration: CompileIQ's fields, their validation edges and the engine mapping."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ciq_tune.compat import SearchConfiguration
from ciq_tune.compat import WorkerTypes
from ciq_tune.compat.search import _as_worker_type
from ciq_tune.engine import EngineConfig
from ciq_tune.errors import EngineError


def test_defaults_map_onto_a_valid_engine_config() -> None:
    config = SearchConfiguration(pool_size=12, mutate_rate=0.5)
    settings = config.engine_settings()
    assert settings == {"pool_size": 12, "survivors": 6, "mutation_prob": 0.5}
    assert EngineConfig(**settings).survivors == 6
    assert config.weights == [1.0]


def test_cull_size_is_the_number_of_survivors_and_large_fail_pool_refills() -> None:
    config = SearchConfiguration(pool_size=8, cull_size=3, enable_large_fail_pool=True)
    assert config.engine_settings() == {
        "pool_size": 8,
        "survivors": 3,
        "mutation_prob": 0.1,
        "max_refills": 3,
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"pool_size": 5}, "pool_size"),
        ({"pool_size": 4097}, "pool_size"),
        ({"pool_size": 6, "cull_size": 6}, "cull_size=6"),
        ({"cull_size": 1}, "cull_size"),
        ({"num_objectives": 0}, "num_objectives"),
        ({"num_objectives": 65}, "num_objectives"),
        ({"mutate_rate": 0.0}, "mutate_rate"),
        ({"mutate_rate": 1.5}, "mutate_rate"),
        ({"problem_type": "minimize"}, "problem_type"),
        ({"num_objectives": 2, "objective_weights": [1.0]}, "one weight per objective"),
        ({"objective_weights": [0.0]}, "must be positive"),
        ({"init_with_true_random_threshold": 1.1}, "init_with_true_random_threshold"),
        ({"pool_sise": 12}, "pool_sise"),
    ],
)
def test_invalid_fields_name_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SearchConfiguration(**fields)


def test_worker_types_accept_names_and_reject_custom_workers() -> None:
    assert _as_worker_type("ray") is WorkerTypes.RAY
    assert _as_worker_type(WorkerTypes.ISOLATED) is WorkerTypes.ISOLATED
    with pytest.raises(EngineError, match="worker_type=<class 'object'>"):
        _as_worker_type(object)  # type: ignore[arg-type]
