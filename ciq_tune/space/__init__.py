"""Search spaces: CompileIQ-compatible primitives plus continuous values, constraints and
conditional parameters.

    import ciq_tune.space as ss
    space = {"x": ss.range(1.0, 20.0, 0.5), "y": ss.choice([1, 2, 3]),
             "z": ss.literal("flag", knockout_prob=0.5)}
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from ciq_tune.space.constraints import Constraint
from ciq_tune.space.primitives import KNOCKED_OUT
from ciq_tune.space.primitives import Choice
from ciq_tune.space.primitives import Literal
from ciq_tune.space.primitives import LogSampling
from ciq_tune.space.primitives import Parameter
from ciq_tune.space.primitives import Range
from ciq_tune.space.primitives import Uniform
from ciq_tune.space.primitives import parameter_from_dict
from ciq_tune.space.space import Conditional
from ciq_tune.space.space import SearchSpace

__all__ = [
    "KNOCKED_OUT",
    "Choice",
    "Conditional",
    "Constraint",
    "Literal",
    "LogSampling",
    "Parameter",
    "Range",
    "SearchSpace",
    "Uniform",
    "choice",
    "conditional",
    "literal",
    "log_sampling",
    "ordinal",
    "parameter_from_dict",
    "range",
    "uniform",
]


def range(
    start: float,
    end: float,
    step: float = 1,
    knockout_prob: float | None = None,
    seed_low: float | None = None,
    seed_high: float | None = None,
) -> Range:
    """Values from `start` to `end` inclusive in steps of `step` (ordinal)."""
    return Range(start, end, step, knockout_prob, seed_low, seed_high)


def choice(values: Sequence[Any], knockout_prob: float | None = None) -> Choice:
    """One of `values`, unordered (categorical)."""
    return Choice(values, knockout_prob)


def ordinal(values: Sequence[Any], knockout_prob: float | None = None) -> Choice:
    """One of `values`, whose order matters: mutation prefers neighbouring values."""
    return Choice(values, knockout_prob, ordered=True)


def literal(const_value: Any, knockout_prob: float | None = None) -> Literal:
    """A constant; with `knockout_prob` present or left out (e.g. a compiler flag)."""
    return Literal(const_value, knockout_prob)


def log_sampling(
    start: float, end: float, total: int = 10, knockout_prob: float | None = None
) -> LogSampling:
    """`total` log-spaced values from `start` to `end` inclusive (ordinal)."""
    return LogSampling(start, end, total, knockout_prob)


def uniform(
    low: float, high: float, knockout_prob: float | None = None, *, log: bool = False
) -> Uniform:
    """A continuous value in [low, high] (log scale when `log=True`)."""
    return Uniform(low, high, knockout_prob, log=log)


def conditional(spec: Any, when: str | Callable[[Mapping[str, Any]], bool]) -> Conditional:
    """`spec` (a parameter or nested spec) exists only when `when` holds."""
    return Conditional(spec, when)
