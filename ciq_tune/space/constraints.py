"""Constraints over parameters: safe expressions such as ``"BM * BN <= 65536"`` or callables."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from ciq_tune.errors import ConstraintError

# Calls an expression may make: pure functions of numbers, nothing that reaches the system.
_ALLOWED_FUNCTIONS: dict[str, Any] = {
    "abs": abs,
    "min": min,
    "max": max,
    "int": int,
    "float": float,
    "round": round,
    "len": len,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "ceil": math.ceil,
    "floor": math.floor,
}
_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Tuple,
    ast.List,
    ast.And,
    ast.Or,
    ast.Not,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.USub,
    ast.UAdd,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Is,
    ast.IsNot,
    ast.BitAnd,
    ast.BitOr,
    ast.BitXor,
    ast.LShift,
    ast.RShift,
)


class Constraint:
    """A predicate that a feasible configuration satisfies.

    A string is a Python expression over parameter names (the last part of a nested key when
    that is unique, e.g. ``BM`` for ``{"tile": {"BM": …}}``), numbers and the functions
    ``abs min max int float round len log2 sqrt ceil floor``. It is parsed once and checked
    for anything else, so a space file cannot run arbitrary code. A constraint that names a
    parameter which is knocked out or inactive holds trivially.

    A callable receives the flat configuration ``{"tile/BM": 64, …}`` of active parameters.
    """

    def __init__(self, rule: str | Callable[[Mapping[str, Any]], bool]) -> None:
        self.rule = rule
        self.names: frozenset[str] = frozenset()
        self._code: Any = None
        if isinstance(rule, str):
            self._code, self.names = _compile_expression(rule)
        elif not callable(rule):
            raise ConstraintError(
                f"a constraint must be an expression string or a callable, got {rule!r}"
            )

    def bind(self, aliases: Mapping[str, str]) -> None:
        """Check that every name in an expression is a parameter (`aliases`: name → flat key)."""
        unknown = sorted(n for n in self.names if n not in aliases and n not in _ALLOWED_FUNCTIONS)
        if unknown:
            raise ConstraintError(
                f"constraint {self.rule!r} names {unknown}, which are not parameters of the space; "
                f"known names: {sorted(aliases)}"
            )
        self._aliases = dict(aliases)

    def holds(self, flat: Mapping[str, Any]) -> bool:
        """True when the flat configuration of active parameters satisfies the constraint."""
        if self._code is None:
            return bool(self.rule(flat))  # type: ignore[operator]
        scope: dict[str, Any] = dict(_ALLOWED_FUNCTIONS)
        for name in self.names:
            if name in _ALLOWED_FUNCTIONS:
                continue
            key = self._aliases[name]
            if key not in flat:
                return True  # the parameter is knocked out or inactive
            scope[name] = flat[key]
        try:
            return bool(eval(self._code, {"__builtins__": {}}, scope))
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise ConstraintError(
                f"constraint {self.rule!r} failed on {dict(flat)!r}: {exc}"
            ) from exc

    def to_json(self) -> str | None:
        """The expression text, or None for a callable (which cannot be stored as text)."""
        return self.rule if isinstance(self.rule, str) else None

    def __repr__(self) -> str:
        return f"Constraint({self.rule!r})"


class SafeExpression:
    """An arithmetic expression over named values that may call only pure number functions
    (``abs``, ``min``, ``max``, ``log2``, ``ceil``, …), e.g. ``"ceil(N / BM)"``.

    Args:
        text: The expression; a `ConstraintError` says what it uses that is not allowed.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._code, names = _compile_expression(text)
        self.names: frozenset[str] = frozenset(n for n in names if n not in _ALLOWED_FUNCTIONS)
        """The values the expression reads (the functions it calls excluded)."""

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        """The expression's value with `scope`'s names bound (errors propagate as raised)."""
        return eval(self._code, {"__builtins__": {}}, {**_ALLOWED_FUNCTIONS, **scope})


def _compile_expression(text: str) -> tuple[Any, frozenset[str]]:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ConstraintError(f"constraint {text!r} is not a valid expression: {exc.msg}") from exc
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ConstraintError(
                f"constraint {text!r} uses `{type(node).__name__}`, which is not allowed; use "
                "arithmetic, comparisons, and/or/not and the functions "
                f"{sorted(_ALLOWED_FUNCTIONS)}"
            )
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _ALLOWED_FUNCTIONS
        ):
            raise ConstraintError(
                f"constraint {text!r} calls something other than {sorted(_ALLOWED_FUNCTIONS)}"
            )
        if isinstance(node, ast.Name):
            names.add(node.id)
    return compile(tree, "<constraint>", "eval"), frozenset(names)
