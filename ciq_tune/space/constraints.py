"""Constraints over parameters: safe expressions such as ``"BM * BN <= 65536"`` or callables."""

from __future__ import annotations

import ast
import math
import numbers
import operator
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from ciq_tune.errors import ConstraintError

# Bounds of expression evaluation: no kernel space needs more, and past them one operation can
# take minutes and gigabytes (``BLOCK ** 10 ** 9``, ``1 << 10 ** 10``).
MAX_EXPONENT = 64
"""The largest exponent of ``**`` between integers."""
MAX_SHIFT = 64
"""The largest shift amount of ``<<`` and ``>>``."""
MAX_INT = 2**256
"""The largest magnitude of an integer an expression uses or computes."""

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
# The nodes of an expression besides its operators (`_OPERATORS`, `_UNARY`).
_STRUCTURE_NODES = (
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
)


class Constraint:
    """A predicate that a feasible configuration satisfies.

    A string is a Python expression over parameter names (the last part of a nested key when
    that is unique, e.g. ``BM`` for ``{"tile": {"BM": …}}``), numbers and the functions
    ``abs min max int float round len log2 sqrt ceil floor``. It is parsed once and checked
    for anything else, so a space file cannot run arbitrary code, and it is evaluated within
    bounds (`MAX_EXPONENT`, `MAX_SHIFT`, `MAX_INT`), so it cannot take minutes or gigabytes. A
    constraint that names a parameter which is knocked out or inactive holds trivially.

    A callable receives the flat configuration ``{"tile/BM": 64, …}`` of active parameters.
    """

    def __init__(self, rule: str | Callable[[Mapping[str, Any]], bool]) -> None:
        self.rule = rule
        self.names: frozenset[str] = frozenset()
        self._code: Any = None
        if isinstance(rule, str):
            self._code, self.names = _compile_expression(rule, "constraint")
        elif not callable(rule):
            raise ConstraintError(
                f"a constraint must be an expression string or a callable, got {rule!r}"
            )

    def bind(self, aliases: Mapping[str, str]) -> None:
        """Check that every name in an expression is a parameter (`aliases`: name → flat key)."""
        unknown = sorted(n for n in self.names if n not in aliases and n not in _ALLOWED_FUNCTIONS)
        if unknown:
            raise ConstraintError(
                f"constraint {_shown(self.rule)} names {unknown}, which are not parameters of the "
                f"space; known names: {sorted(aliases)}"
            )
        self._aliases = dict(aliases)

    def holds(self, flat: Mapping[str, Any]) -> bool:
        """True when the flat configuration of active parameters satisfies the constraint."""
        if self._code is None:
            return bool(self.rule(flat))  # type: ignore[operator]
        scope: dict[str, Any] = dict(_FUNCTIONS)
        for name in self.names:
            if name in _ALLOWED_FUNCTIONS:
                continue
            key = self._aliases[name]
            if key not in flat:
                return True  # the parameter is knocked out or inactive
            scope[name] = flat[key]
        try:
            return bool(_run(self._code, scope))
        except _Bound as exc:
            raise ConstraintError(
                f"constraint {_shown(self.rule)} {exc.problem} on {dict(flat)!r}; {exc.rule}"
            ) from None
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise ConstraintError(
                f"constraint {_shown(self.rule)} failed on {dict(flat)!r}: {exc}"
            ) from exc

    def to_json(self) -> str | None:
        """The expression text, or None for a callable (which cannot be stored as text)."""
        return self.rule if isinstance(self.rule, str) else None

    def __repr__(self) -> str:
        return f"Constraint({self.rule!r})"


class SafeExpression:
    """An arithmetic expression over named values that may call only pure number functions
    (``abs``, ``min``, ``max``, ``log2``, ``ceil``, …), e.g. ``"ceil(N / BM)"``, evaluated
    within the same bounds as a `Constraint`.

    Args:
        text: The expression; a `ConstraintError` says what it uses that is not allowed, or
            which bound a part without names (``1 << 10 ** 10``) breaks.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._code, names = _compile_expression(text, "expression")
        self.names: frozenset[str] = frozenset(n for n in names if n not in _ALLOWED_FUNCTIONS)
        """The values the expression reads (the functions it calls excluded)."""

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        """The expression's value with `scope`'s names bound.

        Raises:
            ConstraintError: a bound of evaluation is broken (its message names the expression
                and the rule); other errors (``ZeroDivisionError``, …) propagate as raised.
        """
        try:
            return _run(self._code, {**_FUNCTIONS, **scope})
        except _Bound as exc:
            raise ConstraintError(
                f"expression {_shown(self.text)} {exc.problem} on {dict(scope)!r}; {exc.rule}"
            ) from None


# -- the bounded evaluator -----------------------------------------------------------------------
# An expression is compiled with each arithmetic operation (`a ** b`) replaced by a call
# ``__arith__("**", a, b)`` and each function by a wrapper, which check the bounds before and
# after computing; parts without names are computed (and checked) once, when parsing.
_ARITH = "__arith__"
_OPERATORS: dict[type[ast.operator], tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.Pow: ("**", operator.pow),
    ast.BitAnd: ("&", operator.and_),
    ast.BitOr: ("|", operator.or_),
    ast.BitXor: ("^", operator.xor),
    ast.LShift: ("<<", operator.lshift),
    ast.RShift: (">>", operator.rshift),
}
_BY_SYMBOL = dict(_OPERATORS.values())
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_ALLOWED_NODES = (*_STRUCTURE_NODES, *_OPERATORS, *_UNARY)
_EXPONENT_RULE = f"the exponent of `**` is at most {MAX_EXPONENT} when it is an integer"
_SHIFT_RULE = f"a shift amount of `<<` or `>>` is at most {MAX_SHIFT}"
_INT_RULE = "integers are at most 2**256 in magnitude"


class _Bound(Exception):
    """An operation past a bound of evaluation: what it did and the rule it breaks."""

    def __init__(self, problem: str, rule: str) -> None:
        super().__init__(f"{problem}; {rule}")
        self.problem = problem
        self.rule = rule


def _check_int(value: Any) -> Any:
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:
        raise _Bound(f"reaches an integer of {value.bit_length()} bits", _INT_RULE)
    return value


def _check_amount(symbol: str, amount: Any) -> None:
    if not isinstance(amount, numbers.Integral):
        return
    amount = int(amount)
    if symbol == "**" and amount > MAX_EXPONENT:
        raise _Bound(f"raises to the power {amount}", _EXPONENT_RULE)
    if symbol in ("<<", ">>") and amount > MAX_SHIFT:
        raise _Bound(f"shifts by {amount}", _SHIFT_RULE)


def _arith(symbol: str, left: Any, right: Any) -> Any:
    """``left <symbol> right`` on numbers within the bounds."""
    for value in (left, right):
        if not isinstance(value, numbers.Number):
            raise _Bound(
                f"applies `{symbol}` to a {type(value).__name__}", "arithmetic is on numbers only"
            )
        _check_int(value)
    _check_amount(symbol, right)
    return _check_int(_BY_SYMBOL[symbol](left, right))


def _bounded(function: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        return _check_int(function(*args))

    return call


def _round(number: Any, ndigits: Any = None) -> Any:
    if isinstance(ndigits, numbers.Integral) and abs(int(ndigits)) > MAX_EXPONENT:
        raise _Bound(f"rounds to {ndigits} digits", f"round's digits are at most {MAX_EXPONENT}")
    return _check_int(round(number) if ndigits is None else round(number, ndigits))


_FUNCTIONS: dict[str, Any] = {
    name: _round if name == "round" else _bounded(function)
    for name, function in _ALLOWED_FUNCTIONS.items()
}


def _run(code: Any, scope: dict[str, Any]) -> Any:
    scope[_ARITH] = _arith
    return eval(code, {"__builtins__": {}}, scope)


class _Bounder(ast.NodeTransformer):
    """Rewrites arithmetic as `_arith` calls and computes the parts without names."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        _check_int(node.value)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        operand = node.operand
        if isinstance(operand, ast.Constant) and type(node.op) in _UNARY:
            unary = _UNARY[type(node.op)]
            return _fold(node, lambda: unary(operand.value)) or node
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        symbol = _OPERATORS[type(node.op)][0]
        left, right = node.left, node.right
        if isinstance(right, ast.Constant):
            _check_amount(symbol, right.value)
            if isinstance(left, ast.Constant):
                folded = _fold(node, lambda: _arith(symbol, left.value, right.value))
                if folded is not None:
                    return folded
        call = ast.Call(ast.Name(_ARITH, ast.Load()), [ast.Constant(symbol), left, right], [])
        return ast.copy_location(call, node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        function = _FUNCTIONS.get(node.func.id) if isinstance(node.func, ast.Name) else None
        args = node.args
        if function is not None and all(isinstance(a, ast.Constant) for a in args):
            values = [a.value for a in args if isinstance(a, ast.Constant)]
            return _fold(node, lambda: function(*values)) or node
        return node


def _fold(node: ast.expr, compute: Callable[[], Any]) -> ast.Constant | None:
    """`node`'s value as a constant, or None when computing it fails (``1 / 0``: the error comes
    when the expression is evaluated); a broken bound raises `_Bound`."""
    try:
        value = compute()
    except (ArithmeticError, TypeError, ValueError):
        return None
    if not isinstance(value, (int, float, str)):
        return None
    return ast.copy_location(ast.Constant(value), node)


def _shown(text: Any, limit: int = 200) -> str:
    """`text` quoted for a message, cut to `limit` characters."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit] + "…"


def _compile_expression(text: str, what: str) -> tuple[Any, frozenset[str]]:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ConstraintError(
            f"{what} {_shown(text)} is not a valid expression: {exc.msg}"
        ) from None
    except (RecursionError, MemoryError):
        raise ConstraintError(f"{what} {_shown(text)} is nested too deeply") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ConstraintError(
                f"{what} {_shown(text)} uses `{type(node).__name__}`, which is not allowed; use "
                "arithmetic, comparisons, and/or/not and the functions "
                f"{sorted(_ALLOWED_FUNCTIONS)}"
            )
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _ALLOWED_FUNCTIONS
        ):
            raise ConstraintError(
                f"{what} {_shown(text)} calls something other than {sorted(_ALLOWED_FUNCTIONS)}"
            )
        if isinstance(node, ast.Name):
            if node.id.startswith("__"):
                raise ConstraintError(
                    f"{what} {_shown(text)} names {node.id!r}; names starting with `__` are "
                    "not allowed"
                )
            names.add(node.id)
    try:
        bounded = ast.fix_missing_locations(_Bounder().visit(tree))
        code = compile(bounded, "<expression>", "eval")
    except _Bound as exc:
        raise ConstraintError(f"{what} {_shown(text)} {exc.problem}; {exc.rule}") from None
    except (RecursionError, MemoryError):
        raise ConstraintError(f"{what} {_shown(text)} is nested too deeply") from None
    return code, frozenset(names)
