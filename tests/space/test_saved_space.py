"""Loading a saved space runs no code unless asked: expressions load, references and pickles
are refused without `allow_pickle`."""

from __future__ import annotations

import json

import pytest

import ciq_tune.space as ss
from ciq_tune.errors import SpaceError
from tests.space.constraint_rules import small_tile


def _space(*constraints: object) -> ss.SearchSpace:
    spec = {"BM": ss.choice([16, 32, 64]), "BN": ss.choice([16, 32, 64])}
    return ss.SearchSpace(spec, constraints=list(constraints))  # type: ignore[arg-type]


def test_expressions_round_trip_and_module_functions_load_only_when_trusted() -> None:
    space = _space("BM >= BN", small_tile)
    saved = json.loads(json.dumps(space.to_dict()))
    assert saved["constraints"] == [
        {"expr": "BM >= BN"},
        {"ref": "tests.space.constraint_rules:small_tile"},
    ]
    assert ss.SearchSpace.from_dict({**saved, "constraints": saved["constraints"][:1]}).sample(
        3, seed=0
    ) == _space("BM >= BN").sample(3, seed=0)
    with pytest.raises(SpaceError, match=r"field `constraints\[1\]\.ref`.*never runs code"):
        ss.SearchSpace.from_dict(saved)
    again = ss.SearchSpace.from_dict(saved, allow_pickle=True)
    assert again.constraints[1].rule is small_tile
    assert again.sample(3, seed=0) == space.sample(3, seed=0)


def test_a_reference_in_a_condition_is_refused_naming_its_field() -> None:
    spec = {"BM": ss.choice([16, 32]), "BK": ss.conditional(ss.choice([1, 2]), when=small_tile)}
    saved = json.loads(json.dumps(ss.SearchSpace(spec).to_dict()))
    with pytest.raises(SpaceError, match=r"^space\.json: field `spec\.\$dict\.BK\.\$conditional"):
        ss.SearchSpace.from_dict(saved, source="space.json")
    assert ss.SearchSpace.from_dict(saved, allow_pickle=True).leaves[1].conditions[0].rule is (
        small_tile
    )


def test_a_lambda_is_pickled_and_loads_only_when_allowed() -> None:
    space = _space(lambda c: c["BM"] != 32)
    saved = json.loads(json.dumps(space.to_dict()))
    assert "pickled" in saved["constraints"][0]
    with pytest.raises(SpaceError, match="allow_pickle=True"):
        ss.SearchSpace.from_dict(saved)
    again = ss.SearchSpace.from_dict(saved, allow_pickle=True)
    assert all(c["BM"] != 32 for c in again.sample(4, seed=1))


@pytest.mark.parametrize(
    ("constraint", "message"),
    [
        ({"ref": "os:system"}, "standard-library"),
        ({"ref": "builtins:eval"}, "standard-library"),
        ({"ref": "not a reference"}, "module:function"),
        ({"ref": "tests.space.nowhere:f"}, "cannot be imported"),
        ({"ref": "tests.space.test_saved_space:pytest"}, "not a Python function"),
        ({"other": 1}, "`expr` or `ref`"),
    ],
)
def test_bad_references_are_refused_even_when_trusted(
    constraint: dict[str, object], message: str
) -> None:
    saved = _space().to_dict()
    saved["constraints"] = [constraint]
    with pytest.raises(SpaceError, match=message):
        ss.SearchSpace.from_dict(saved, allow_pickle=True)


@pytest.mark.parametrize("data", [[], "x", {"spec": {"$what": 1}}, {"constraints": []}])
def test_malformed_saved_spaces_are_space_errors(data: object) -> None:
    with pytest.raises(SpaceError):
        ss.SearchSpace.from_dict(data)  # type: ignore[arg-type]
