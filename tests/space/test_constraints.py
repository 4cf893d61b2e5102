"""Expressions are evaluated within bounds: exponents, shifts, integer sizes, numbers only."""

from __future__ import annotations

import time
from typing import Any

import pytest

import ciq_tune.space as ss
from ciq_tune.errors import ConstraintError
from ciq_tune.space.constraints import MAX_EXPONENT
from ciq_tune.space.constraints import MAX_INT
from ciq_tune.space.constraints import MAX_SHIFT
from ciq_tune.space.constraints import Constraint
from ciq_tune.space.constraints import SafeExpression

EXPONENT = "the exponent of `**` is at most 64 when it is an integer"
SHIFT = "a shift amount of `<<` or `>>` is at most 64"
INTEGER = "integers are at most 2**256 in magnitude"


def _holds(text: str, **values: Any) -> bool:
    constraint = Constraint(text)
    constraint.bind({name: name for name in values})
    return constraint.holds(values)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("BLOCK ** (10 ** 9) > 0", EXPONENT),
        ("BLOCK ** -(-(10 ** 9)) > 0", EXPONENT),
        ("BLOCK << 10 ** 10 > 0", SHIFT),
        ("BLOCK >> 10 ** 10 >= 0", SHIFT),
        ("BLOCK * 2 ** 300 > 0", EXPONENT),
        ("BLOCK < " + str(2**300), INTEGER),
        ("BLOCK * ((1 << 64) * (1 << 64) * (1 << 64) * (1 << 64) * (1 << 64)) > 0", INTEGER),
        ("BLOCK > round(5, -10 ** 9)", "round's digits are at most 64"),
        ("BLOCK > len('a' * 10 ** 9)", "arithmetic is on numbers only"),
    ],
)
def test_a_bound_broken_by_a_part_without_names_is_refused_when_parsed(
    text: str, rule: str
) -> None:
    start = time.process_time()
    with pytest.raises(ConstraintError, match="^constraint .*; " + rule.replace("*", r"\*")):
        Constraint(text)
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize(
    ("text", "values", "rule"),
    [
        ("BLOCK ** N > 0", {"BLOCK": 2, "N": 10**9}, EXPONENT),
        ("BLOCK << N > 0", {"BLOCK": 2, "N": 10**10}, SHIFT),
        ("BLOCK ** 64 > 0", {"BLOCK": 2**10}, INTEGER),
        ("BLOCK * BLOCK > 0", {"BLOCK": 2**200}, INTEGER),
        ("BLOCK + 1 > 0", {"BLOCK": 2**300}, INTEGER),
        ("int(X) > 0", {"X": 1e300}, INTEGER),
        ("round(BLOCK, N) > 0", {"BLOCK": 5, "N": -(10**9)}, "round's digits are at most 64"),
        ("'%0999999999d' % BLOCK != ''", {"BLOCK": 1}, "arithmetic is on numbers only"),
        ("len(S * N) > 0", {"S": "a", "N": 10**9}, "arithmetic is on numbers only"),
    ],
)
def test_a_bound_broken_by_a_configuration_is_one_error_naming_the_rule(
    text: str, values: dict[str, Any], rule: str
) -> None:
    start = time.process_time()
    with pytest.raises(ConstraintError) as info:
        _holds(text, **values)
    assert time.process_time() - start < 1.0
    message = str(info.value)
    assert message.startswith(f"constraint {text!r} ") and message.endswith(rule), message
    assert "\n" not in message


def test_the_bounds_leave_kernel_arithmetic_alone() -> None:
    assert (MAX_EXPONENT, MAX_SHIFT, MAX_INT) == (64, 64, 2**256)
    assert _holds("BM * BN * 4 <= 65536 and BM % 16 == 0", BM=64, BN=128)
    assert _holds("2 ** LOG == BLOCK and 1 << LOG == BLOCK and BLOCK >> LOG == 1", LOG=6, BLOCK=64)
    assert _holds("BLOCK ** 64 == 2 ** 64 and (1 << 64) - 1 > 0 and -(1 << 64) < 0", BLOCK=2)
    assert _holds("log2(BLOCK) == int(log2(BLOCK)) and ceil(N / BLOCK) == 16", BLOCK=64, N=1000)
    assert _holds("x ** 0.5 < 2 and 2 ** 100.0 > 0 and round(x, 2) == 2.5", x=2.5)
    assert _holds(
        "algorithm == 'split_k' and algorithm in ('split_k', 'stream_k')", algorithm="split_k"
    )
    assert not _holds("BLOCK * 2 > 64", BLOCK=16)
    with pytest.raises(ConstraintError, match=r"failed on .*division by zero"):
        _holds("BLOCK / 0 > 0", BLOCK=1)  # an ordinary error is reported as before


def test_a_grid_expression_shares_the_bounds() -> None:
    grid = SafeExpression("(M // BM, ceil(N / BN))")
    assert grid.evaluate({"M": 128, "BM": 64, "N": 100, "BN": 32}) == (2, 4)
    with pytest.raises(ConstraintError, match=r"^expression '\(BLOCK << 10\*\*10,\)' shifts by"):
        SafeExpression("(BLOCK << 10**10,)")
    with pytest.raises(ConstraintError, match=r"^expression '\(BLOCK << N,\)' shifts by 100 on"):
        SafeExpression("(BLOCK << N,)").evaluate({"BLOCK": 1, "N": 100})


def test_sampling_a_space_with_a_hostile_constraint_stops_at_once() -> None:
    space = ss.SearchSpace({"BLOCK": ss.choice([2, 4]), "N": ss.choice([10**9])})
    hostile = ss.SearchSpace(
        {"BLOCK": ss.choice([2, 4]), "N": ss.choice([10**9])}, constraints=["BLOCK ** N > 0"]
    )
    assert len(space.sample(1, seed=0)) == 1
    start = time.process_time()
    with pytest.raises(ConstraintError, match=EXPONENT.replace("*", r"\*")):
        hostile.sample(1, seed=0)
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize("text", ["1" + " + 1" * 5000 + " > 0", "__arith__ > 0"])
def test_deep_or_reserved_expressions_are_refused(text: str) -> None:
    with pytest.raises(
        ConstraintError, match=r"nested too deeply|names starting with `__`"
    ) as info:
        Constraint(text)
    assert len(str(info.value)) < 400
