"""Search-space primitives: one class per kind of parameter, each carrying its own behaviour.

A primitive maps between a user-facing *value* and a *gene*, the engine's representation:

- discrete primitives (`Range`, `Choice`, `Literal`, `LogSampling`) use the integer index of the
  value in their ordered value list;
- `Uniform` uses the float value itself;
- a knocked-out parameter (CompileIQ's `knockout_prob`: the parameter is left out of the
  configuration, e.g. a compiler flag not passed) has the gene `None`.

Engine code only calls the methods below (`sample`, `mutate`, `local_move`, `shift`,
`neighbors`, `encode`, `decode`, `cardinality`, `default`, `to_unit`) and never switches on the
primitive's type.
"""

from __future__ import annotations

import json
import math
from abc import ABC
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from ciq_tune.errors import SpaceError

Gene = int | float | None

KNOCKED_OUT: Any = None
"""The gene of a parameter that is knocked out (left out of the configuration)."""

# Share of mutations of an ordinal gene that jump further than one step: keeps the search from
# crawling through long ranges one value at a time while still favouring near neighbours.
_ORDINAL_LONG_JUMP_PROB = 0.25
# Standard deviation of a continuous mutation, as a fraction of the parameter's (log-)range.
_CONTINUOUS_MUTATION_SIGMA = 0.1
# Smallest step of a continuous `local_move`, as a fraction of the (log-)range: a pattern
# search polishes down to this resolution (a ten-thousandth of the range).
_CONTINUOUS_FINEST_STEP = 1e-4
# Probability that a `local_move` of a knockout-able, present parameter toggles it off.
_LOCAL_KNOCKOUT_PROB = 0.25


def _check_knockout(knockout_prob: float | None) -> float | None:
    if knockout_prob is None:
        return None
    if not isinstance(knockout_prob, (int, float)) or not 0.0 <= knockout_prob <= 1.0:
        raise SpaceError(
            f"`knockout_prob` must be a probability in [0, 1], got knockout_prob={knockout_prob!r}"
        )
    return float(knockout_prob)


def _json_safe(value: Any, what: str) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise SpaceError(
            f"{what} must be JSON-serialisable (numbers, strings, booleans, None, lists, dicts) so "
            f"that results and searcher state can be saved; got {value!r}"
        ) from exc
    return value


def _ordinal_step(index: int, step: int, n: int, rng: np.random.Generator) -> int:
    """The index `step` values from `index` (of `n`) in a random direction: the other direction
    when that one leaves the list, else the bound; another index than `index` when `n` > 1."""
    direction = 1 if rng.random() < 0.5 else -1
    target = index + direction * step
    if not 0 <= target < n:
        target = index - direction * step
    target = min(max(target, 0), n - 1)
    if target == index:
        target = index + 1 if index + 1 < n else index - 1
    return target


class Parameter(ABC):
    """One searchable leaf of a search space.

    Subclasses implement the `_value_*` hooks for a present value; this base adds the knockout
    state on top, so that every primitive supports `knockout_prob` the same way.
    """

    kind: str = ""
    knockout_prob: float | None

    # -- public API used by spaces and engines -----------------------------------------------
    def sample(self, rng: np.random.Generator, *, seeded: bool = False) -> Gene:
        """Draw a random gene; `seeded` restricts draws to the seed range, if one is set."""
        if self.knockout_prob is not None and rng.random() < self.knockout_prob:
            return KNOCKED_OUT
        return self._value_sample(rng, seeded=seeded)

    def quantile(self, u: float, *, seeded: bool = False) -> Gene:
        """The gene at quantile `u` in [0, 1) of `sample`'s distribution: knocked out below
        `knockout_prob`, else the value at that position of the (seed, log) range. Evenly
        spread `u` (a Latin hypercube's column) give evenly spread genes."""
        u = min(max(float(u), 0.0), math.nextafter(1.0, 0.0))
        if self.knockout_prob is not None:
            if u < self.knockout_prob:
                return KNOCKED_OUT
            u = (u - self.knockout_prob) / (1.0 - self.knockout_prob)
        return self._value_quantile(u, seeded=seeded)

    def mutate(self, gene: Gene, rng: np.random.Generator) -> Gene:
        """Return a gene different from `gene` when the parameter has more than one state."""
        if self.knockout_prob is not None:
            if gene is KNOCKED_OUT:
                return self._value_sample(rng, seeded=False)
            # Toggle presence as often as a value change when there is nothing else to change.
            toggle_prob = 1.0 if self._value_cardinality() <= 1 else 0.5
            if rng.random() < toggle_prob:
                return KNOCKED_OUT
        if self._value_cardinality() <= 1:
            return gene
        return self._value_mutate(gene, rng)

    def local_move(self, gene: Gene, rng: np.random.Generator, reach: float = 0.5) -> Gene:
        """A pattern-search move at a random scale: for ordered values a step whose length is
        log-uniform between one value and `reach` x the range (as likely 1-2 steps as 64-128),
        so that one operator both crosses a 400-value range and polishes the last step;
        another value for categories; a knockout toggle now and then. Returns a different gene
        when the parameter has more than one state.

        Args:
            gene: the gene to move.
            rng: the engine's generator.
            reach: the longest step, as a fraction of the (log-)range (a trust region).
        """
        if self.knockout_prob is not None:
            if gene is KNOCKED_OUT:
                return self._value_sample(rng, seeded=False)
            if self._value_cardinality() <= 1 or rng.random() < _LOCAL_KNOCKOUT_PROB:
                return KNOCKED_OUT
        if self._value_cardinality() <= 1:
            return gene
        return self._value_local_move(gene, rng, reach)

    def shift(self, gene: Gene, offset: float) -> Gene:
        """An ordered value moved by `offset` x its (log-)range, by at least one value for a
        discrete parameter, clipped to the bounds (the coordinate step of a compass search).
        Knocked-out genes and unordered values are returned unchanged.

        Args:
            gene: the gene to move.
            offset: signed distance as a fraction of the (log-)range; 0 returns `gene`.
        """
        if gene is KNOCKED_OUT or not self.is_ordered or offset == 0:
            return gene
        return self._value_shift(gene, offset)

    def neighbors(self, gene: Gene, radius: int = 1) -> list[Gene]:
        """Genes at most `radius` steps away (ordinal) or all alternatives (categorical)."""
        if gene is KNOCKED_OUT:
            return [self.default_present()]
        found = self._value_neighbors(gene, radius)
        if self.knockout_prob is not None:
            found.append(KNOCKED_OUT)
        return found

    def encode(self, value: Any) -> Gene:
        """Map a user value to its gene; raises `SpaceError` for a value outside the domain."""
        return self._value_encode(value)

    def decode(self, gene: Gene) -> Any:
        """Map a gene to the user value (`KNOCKED_OUT` stays `KNOCKED_OUT`)."""
        if gene is KNOCKED_OUT:
            return KNOCKED_OUT
        return self._value_decode(gene)

    def cardinality(self) -> float:
        """Number of distinct states, the knocked-out state included (inf when continuous)."""
        return self._value_cardinality() + (1 if self.knockout_prob is not None else 0)

    def in_seed_range(self, gene: Gene) -> bool:
        """Whether `gene` lies in the seed range (True without one, and when knocked out)."""
        seed = getattr(self, "_seed_indices", None)
        if seed is None or gene is None:  # None: knocked out
            return True
        return bool(seed[0] <= gene <= seed[1])

    def default(self) -> Gene:
        """The configuration a user gets without tuning: knocked out if it can be, else the
        declared default (or the first value)."""
        if self.knockout_prob is not None and self._default_value is None:
            return KNOCKED_OUT
        return self.default_present()

    def default_present(self) -> Gene:
        """The default gene among present values."""
        if self._default_value is not None:
            return self._value_encode(self._default_value)
        return self._value_first()

    def to_unit(self, gene: Gene) -> float:
        """Position of the gene in [0, 1] for distances and models; -1 when knocked out."""
        if gene is KNOCKED_OUT:
            return -1.0
        return self._value_to_unit(gene)

    @property
    def is_continuous(self) -> bool:
        return math.isinf(self._value_cardinality())

    @property
    def is_ordered(self) -> bool:
        return True

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe description, inverted by `ciq_tune.space.parameter_from_dict`."""
        return {"kind": self.kind, **self._args(), "knockout_prob": self.knockout_prob}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "kind")
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Parameter) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    # -- hooks ---------------------------------------------------------------------------------
    _default_value: Any = None

    def _set_default(self, default: Any) -> None:
        """Keep the declared default (None: none), checked against the domain now so that a bad
        default fails where the parameter is written, not in the middle of a search."""
        if default is not None:
            self._value_encode(default)
        self._default_value = default

    # The constructor arguments that `to_dict` records (and `parameter_from_dict` passes back),
    # by attribute name; the declared default and `knockout_prob` come on top.
    _arg_names: tuple[str, ...] = ()

    def _args(self) -> dict[str, Any]:
        args = {name: getattr(self, name) for name in self._arg_names}
        return {**args, "default": self._default_value}

    @abstractmethod
    def _value_sample(self, rng: np.random.Generator, *, seeded: bool) -> Gene: ...

    @abstractmethod
    def _value_quantile(self, u: float, *, seeded: bool) -> Gene: ...

    @abstractmethod
    def _value_mutate(self, gene: Gene, rng: np.random.Generator) -> Gene: ...

    @abstractmethod
    def _value_local_move(self, gene: Gene, rng: np.random.Generator, reach: float) -> Gene: ...

    @abstractmethod
    def _value_shift(self, gene: Gene, offset: float) -> Gene: ...

    @abstractmethod
    def _value_neighbors(self, gene: Gene, radius: int) -> list[Gene]: ...

    @abstractmethod
    def _value_encode(self, value: Any) -> Gene: ...

    @abstractmethod
    def _value_decode(self, gene: Gene) -> Any: ...

    @abstractmethod
    def _value_cardinality(self) -> float: ...

    @abstractmethod
    def _value_first(self) -> Gene: ...

    @abstractmethod
    def _value_to_unit(self, gene: Gene) -> float: ...


class DiscreteParameter(Parameter):
    """A parameter over a finite list of values; the gene is the value's index."""

    values: tuple[Any, ...]
    ordered: bool
    _seed_indices: tuple[int, int] | None = None

    def _init_values(self, values: Sequence[Any], *, ordered: bool, what: str) -> None:
        if len(values) == 0:
            raise SpaceError(f"{what} has no values; give at least one")
        seen: set[str] = set()
        for value in values:
            key = json.dumps(_json_safe(value, f"every value of {what}"), sort_keys=True)
            if key in seen:
                raise SpaceError(f"{what} lists the value {value!r} twice; values must be distinct")
            seen.add(key)
        self.values = tuple(values)
        self.ordered = ordered
        self._index = {json.dumps(v, sort_keys=True): i for i, v in enumerate(self.values)}

    @property
    def is_ordered(self) -> bool:
        return self.ordered

    def _value_sample(self, rng: np.random.Generator, *, seeded: bool) -> Gene:
        low, high = (0, len(self.values) - 1)
        if seeded and self._seed_indices is not None:
            low, high = self._seed_indices
        return int(rng.integers(low, high + 1))

    def _value_quantile(self, u: float, *, seeded: bool) -> Gene:
        low, high = (0, len(self.values) - 1)
        if seeded and self._seed_indices is not None:
            low, high = self._seed_indices
        return min(low + int(u * (high - low + 1)), high)

    def _value_mutate(self, gene: Gene, rng: np.random.Generator) -> Gene:
        assert gene is not None
        n = len(self.values)
        if not self.ordered:
            other = int(rng.integers(0, n - 1))
            return other if other < int(gene) else other + 1
        # Ordinal: mostly a step to a neighbour, sometimes a geometric jump (never zero).
        step = 1
        if rng.random() < _ORDINAL_LONG_JUMP_PROB:
            step = 1 + int(rng.geometric(p=min(1.0, 4.0 / n)))
        return _ordinal_step(int(gene), step, n, rng)

    def _value_local_move(self, gene: Gene, rng: np.random.Generator, reach: float) -> Gene:
        assert gene is not None
        n = len(self.values)
        if not self.ordered:
            return self._value_mutate(gene, rng)
        longest = max(round(reach * (n - 1)), 1)
        step = max(1, round(2.0 ** rng.uniform(0.0, np.log2(longest) + 0.5)))
        return _ordinal_step(int(gene), step, n, rng)

    def _value_shift(self, gene: Gene, offset: float) -> Gene:
        n = len(self.values)
        steps = round(offset * (n - 1)) or (1 if offset > 0 else -1)
        return min(max(int(gene) + steps, 0), n - 1)  # type: ignore[arg-type]

    def _value_neighbors(self, gene: Gene, radius: int) -> list[Gene]:
        assert gene is not None
        n = len(self.values)
        if not self.ordered:
            return [i for i in range(n) if i != gene]
        return [
            i for i in range(int(gene) - radius, int(gene) + radius + 1) if 0 <= i < n and i != gene
        ]

    def _value_encode(self, value: Any) -> Gene:
        try:
            key = json.dumps(value, sort_keys=True)
        except (TypeError, ValueError):
            key = None
        if key is not None and key in self._index:
            return self._index[key]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            for i, v in enumerate(self.values):
                if isinstance(v, (int, float)) and math.isclose(v, value, rel_tol=1e-9):
                    return i
        raise SpaceError(f"value {value!r} is not one of {self!r}'s values {list(self.values)}")

    def _value_decode(self, gene: Gene) -> Any:
        return self.values[int(gene)]  # type: ignore[arg-type]

    def _value_cardinality(self) -> float:
        return len(self.values)

    def _value_first(self) -> Gene:
        return 0

    def _value_to_unit(self, gene: Gene) -> float:
        n = len(self.values)
        return 0.0 if n == 1 else float(gene) / (n - 1)  # type: ignore[arg-type]


def _gene_value(gene: Gene) -> float:
    """A continuous gene as a number (a knocked-out gene has none and never reaches here)."""
    if gene is None:
        raise SpaceError("a continuous parameter's gene is None: it has no value to move")
    return float(gene)


def _numeric(name: str, value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SpaceError(f"`{name}` must be a number, got {name}={value!r}")
    if not math.isfinite(value):
        raise SpaceError(f"`{name}` must be finite, got {name}={value!r}")
    # numpy scalars become Python numbers, so that configurations stay JSON-serialisable.
    number: int | float = value.item() if isinstance(value, np.generic) else value
    return number


def _bounds(start: Any, end: Any) -> tuple[int | float, int | float]:
    """`start` and `end` as numbers, refused unless ``start <= end``."""
    start, end = _numeric("start", start), _numeric("end", end)
    if end < start:
        raise SpaceError(
            f"`end` must be >= `start`, got start={start!r}, end={end!r} (swapped bounds?)"
        )
    return start, end


class Range(DiscreteParameter):
    """Evenly spaced values `start, start+step, …` up to and including `end` (ordinal).

    `seed_low`/`seed_high` restrict the values drawn for the first generation (a prior on
    where good values are) while mutation may still explore the whole range.
    """

    kind = "range"
    _arg_names = ("start", "end", "step", "seed_low", "seed_high")

    def __init__(
        self,
        start: float,
        end: float,
        step: float = 1,
        knockout_prob: float | None = None,
        seed_low: float | None = None,
        seed_high: float | None = None,
        *,
        default: float | None = None,
    ) -> None:
        start, end = _bounds(start, end)
        step = _numeric("step", step)
        if step <= 0:
            raise SpaceError(f"`step` must be positive, got step={step!r}")
        count = math.floor((end - start) / step + 1e-9) + 1
        integral = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        if integral:
            values: list[Any] = [int(start + i * step) for i in range(count)]
        else:
            # Round away float drift (0.1 + 0.2) so that values print and hash as written.
            values = [round(float(start) + i * float(step), 12) for i in range(count)]
        self.start, self.end, self.step = start, end, step
        self.knockout_prob = _check_knockout(knockout_prob)
        self._init_values(values, ordered=True, what=f"range({start}, {end}, {step})")
        self.seed_low, self.seed_high = seed_low, seed_high
        if seed_low is not None or seed_high is not None:
            low = start if seed_low is None else _numeric("seed_low", seed_low)
            high = end if seed_high is None else _numeric("seed_high", seed_high)
            inside = [i for i, v in enumerate(self.values) if low <= v <= high]
            if not inside:
                raise SpaceError(
                    f"seed range [{low}, {high}] holds no value of range({start}, {end}, {step})"
                )
            self._seed_indices = (inside[0], inside[-1])
        self._set_default(default)


class Choice(DiscreteParameter):
    """One of the listed values; categorical unless `ordered=True` (then neighbours matter)."""

    kind = "choice"

    def __init__(
        self,
        values: Sequence[Any],
        knockout_prob: float | None = None,
        *,
        ordered: bool = False,
        default: Any = None,
    ) -> None:
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise SpaceError(f"`values` must be a list of values, got values={values!r}")
        self.knockout_prob = _check_knockout(knockout_prob)
        self._init_values(list(values), ordered=ordered, what="choice")
        self._set_default(default)

    def _args(self) -> dict[str, Any]:
        return {
            "values": list(self.values),
            "ordered": self.ordered,
            "default": self._default_value,
        }


class Literal(DiscreteParameter):
    """A constant; with `knockout_prob` it becomes present-or-absent (e.g. a compiler flag)."""

    kind = "literal"

    def __init__(self, const_value: Any, knockout_prob: float | None = None) -> None:
        self.knockout_prob = _check_knockout(knockout_prob)
        self._init_values([const_value], ordered=True, what="literal")
        self.const_value = const_value

    def _args(self) -> dict[str, Any]:
        return {"const_value": self.const_value}


class LogSampling(DiscreteParameter):
    """`total` log-spaced values from `start` to `end` inclusive (ordinal); integers when both
    bounds are integers (duplicates after rounding are dropped)."""

    kind = "log_sampling"
    _arg_names = ("start", "end", "total")

    def __init__(
        self,
        start: float,
        end: float,
        total: int = 10,
        knockout_prob: float | None = None,
        *,
        default: float | None = None,
    ) -> None:
        start, end = _bounds(start, end)
        if start <= 0:
            raise SpaceError(
                f"log_sampling needs positive bounds, got start={start!r}, end={end!r}"
            )
        if not isinstance(total, int) or total < 1:
            raise SpaceError(f"`total` must be a positive integer, got total={total!r}")
        raw = np.geomspace(start, end, total)
        if all(isinstance(v, (int, np.integer)) for v in (start, end)):
            values: list[Any] = sorted({round(v) for v in raw})
        else:
            values = [float(f"{v:.12g}") for v in raw]
        self.start, self.end, self.total = start, end, total
        self.knockout_prob = _check_knockout(knockout_prob)
        self._init_values(values, ordered=True, what=f"log_sampling({start}, {end}, {total})")
        self._set_default(default)


class Uniform(Parameter):
    """A continuous value in [low, high]; sampled on a log scale when `log=True`."""

    kind = "uniform"
    _arg_names = ("low", "high", "log")

    def __init__(
        self,
        low: float,
        high: float,
        knockout_prob: float | None = None,
        *,
        log: bool = False,
        default: float | None = None,
    ) -> None:
        low, high = float(_numeric("low", low)), float(_numeric("high", high))
        if not high > low:
            raise SpaceError(
                f"`high` must be > `low`, got low={low!r}, high={high!r} (swapped bounds?)"
            )
        if log and low <= 0:
            raise SpaceError(f"a log-scale uniform needs low > 0, got low={low!r}")
        self.low, self.high, self.log = low, high, log
        self.knockout_prob = _check_knockout(knockout_prob)
        self._set_default(default)

    def _to_internal(self, value: float) -> float:
        return math.log(value) if self.log else value

    def _from_internal(self, x: float) -> float:
        value = math.exp(x) if self.log else x
        return min(max(value, self.low), self.high)

    def _value_sample(self, rng: np.random.Generator, *, seeded: bool) -> Gene:
        lo, hi = self._to_internal(self.low), self._to_internal(self.high)
        return self._from_internal(float(rng.uniform(lo, hi)))

    def _value_quantile(self, u: float, *, seeded: bool) -> Gene:
        lo, hi = self._to_internal(self.low), self._to_internal(self.high)
        return self._from_internal(lo + u * (hi - lo))

    def _value_mutate(self, gene: Gene, rng: np.random.Generator) -> Gene:
        lo, hi = self._to_internal(self.low), self._to_internal(self.high)
        x = self._to_internal(_gene_value(gene)) + rng.normal(
            0.0, _CONTINUOUS_MUTATION_SIGMA * (hi - lo)
        )
        return self._from_internal(_reflect(x, lo, hi))

    def _value_local_move(self, gene: Gene, rng: np.random.Generator, reach: float) -> Gene:
        lo, hi = self._to_internal(self.low), self._to_internal(self.high)
        reach = max(reach, _CONTINUOUS_FINEST_STEP)
        scale = 10.0 ** rng.uniform(np.log10(_CONTINUOUS_FINEST_STEP), np.log10(reach))
        x = self._to_internal(_gene_value(gene)) + rng.normal(0.0, scale * (hi - lo))
        return self._from_internal(_reflect(x, lo, hi))

    def _value_shift(self, gene: Gene, offset: float) -> Gene:
        lo, hi = self._to_internal(self.low), self._to_internal(self.high)
        x = self._to_internal(_gene_value(gene)) + offset * (hi - lo)
        return self._from_internal(min(max(x, lo), hi))

    def _value_neighbors(self, gene: Gene, radius: int) -> list[Gene]:
        lo, hi = self._to_internal(self.low), self._to_internal(self.high)
        x, delta = self._to_internal(_gene_value(gene)), 0.05 * radius * (hi - lo)
        return [self._from_internal(v) for v in (x - delta, x + delta) if lo <= v <= hi]

    def _value_encode(self, value: Any) -> Gene:
        v = float(_numeric("value", value))
        if not self.low <= v <= self.high:
            raise SpaceError(f"value {value!r} is outside [{self.low}, {self.high}] of {self!r}")
        return v

    def _value_decode(self, gene: Gene) -> Any:
        return float(gene)  # type: ignore[arg-type]

    def _value_cardinality(self) -> float:
        return math.inf

    def _value_first(self) -> Gene:
        lo, hi = self._to_internal(self.low), self._to_internal(self.high)
        return self._from_internal((lo + hi) / 2)

    def _value_to_unit(self, gene: Gene) -> float:
        lo, hi = self._to_internal(self.low), self._to_internal(self.high)
        return (self._to_internal(float(gene)) - lo) / (hi - lo)  # type: ignore[arg-type]


def _reflect(x: float, lo: float, hi: float) -> float:
    """`x` reflected at the bounds (so that mass does not pile up on them), then clipped."""
    if x < lo:
        x = lo + (lo - x)
    if x > hi:
        x = hi - (x - hi)
    return float(min(max(x, lo), hi))


PARAMETER_KINDS: dict[str, type[Parameter]] = {
    cls.kind: cls for cls in (Range, Choice, Literal, LogSampling, Uniform)
}


def parameter_from_dict(data: dict[str, Any]) -> Parameter:
    """Rebuild a parameter from `Parameter.to_dict()` output."""
    args = dict(data)
    kind = args.pop("kind", None)
    if kind not in PARAMETER_KINDS:
        raise SpaceError(f"unknown parameter kind {kind!r}; known: {sorted(PARAMETER_KINDS)}")
    cls = PARAMETER_KINDS[kind]
    args = {k: v for k, v in args.items() if not (v is None and k != "const_value")}
    return cls(**args)
