"""Search spaces: CompileIQ-compatible primitives plus continuous values, constraints and
conditional parameters.

    import ciq_tune.space as ss
    space = {"x": ss.range(1.0, 20.0, 0.5), "y": ss.choice([1, 2, 3]),
             "z": ss.literal("flag", knockout_prob=0.5)}
"""

from __future__ import annotations

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


# CompileIQ's factory names are the primitives themselves (`range` takes `Range`'s arguments).
range = Range
choice = Choice
literal = Literal
log_sampling = LogSampling
uniform = Uniform
conditional = Conditional


def ordinal(values: Sequence[Any], knockout_prob: float | None = None) -> Choice:
    """One of `values`, whose order matters: mutation prefers neighbouring values."""
    return Choice(values, knockout_prob, ordered=True)
