"""`SearchSpace`: a nested spec of primitives flattened to a gene vector, with constraints and
conditional parameters."""

from __future__ import annotations

import base64
import hashlib
import importlib
import itertools
import json
import os
import re
import sys
import types
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ciq_tune.errors import ConstraintError
from ciq_tune.errors import SpaceError
from ciq_tune.space.constraints import Constraint
from ciq_tune.space.primitives import KNOCKED_OUT
from ciq_tune.space.primitives import Gene
from ciq_tune.space.primitives import Parameter
from ciq_tune.space.primitives import parameter_from_dict

Genes = tuple[Gene, ...]
KEY_SEPARATOR = "/"
# Random draws tried before a sampler gives up on finding a feasible configuration.
MAX_SAMPLE_TRIES = 10_000
# Spaces up to this many gene combinations may be enumerated when random draws stop finding
# anything new (the search is close to exhausting the space).
MAX_ENUMERATION = 200_000
_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class Conditional:
    """A parameter (or nested spec) that exists only when `when` holds.

    `when` is a constraint expression over parameters declared *before* this one, e.g.
    ``ss.conditional(ss.range(1, 8), when="algorithm == 'split_k'")``.
    """

    def __init__(self, spec: Any, when: str | Callable[[Mapping[str, Any]], bool]) -> None:
        self.spec = spec
        self.when = Constraint(when)


@dataclass(frozen=True)
class Leaf:
    """One searchable parameter of a space: its flat key, path in the spec, and conditions."""

    key: str
    path: tuple[str | int, ...]
    param: Parameter
    conditions: tuple[Constraint, ...]


class SearchSpace:
    """A search space built from a nested dict/list spec of primitives.

    Args:
        spec: a dict (or list) whose leaves are primitives (`ciq_tune.space.range`, …),
            `Conditional` wrappers, nested dicts/lists, or constants passed through unchanged.
        constraints: expressions or callables that every proposed configuration satisfies.

    Configurations are nested like the spec; knocked-out and inactive parameters are left out
    (a dict key is absent, a list item is dropped).
    """

    def __init__(
        self,
        spec: Mapping[str, Any] | Sequence[Any],
        *,
        constraints: Sequence[str | Callable[[Mapping[str, Any]], bool] | Constraint] = (),
    ) -> None:
        if isinstance(spec, SearchSpace):
            raise SpaceError("`spec` is already a SearchSpace; pass it directly instead")
        if not isinstance(spec, (Mapping, list, tuple)):
            raise SpaceError(f"a search space must be a dict or a list of parameters, got {spec!r}")
        self.spec = spec
        leaves: list[Leaf] = []
        self._collect(spec, (), (), leaves)
        if not leaves:
            raise SpaceError("the search space has no parameters to search")
        self.leaves: tuple[Leaf, ...] = tuple(leaves)
        self.keys: tuple[str, ...] = tuple(leaf.key for leaf in leaves)
        self.aliases = _aliases(self.keys)
        self.constraints = tuple(
            c if isinstance(c, Constraint) else Constraint(c) for c in constraints
        )
        for constraint in self.constraints:
            constraint.bind(self.aliases)
        for index, leaf in enumerate(self.leaves):
            earlier = {n: k for n, k in self.aliases.items() if k in self.keys[:index]}
            for condition in leaf.conditions:
                try:
                    condition.bind(earlier)
                except ConstraintError as exc:
                    raise ConstraintError(
                        f"the condition of `{leaf.key}` may only name parameters declared before "
                        f"it: {exc}"
                    ) from exc

    # -- structure -----------------------------------------------------------------------------
    def _collect(
        self,
        node: Any,
        path: tuple[str | int, ...],
        conditions: tuple[Constraint, ...],
        out: list[Leaf],
    ) -> None:
        if isinstance(node, Parameter):
            key = KEY_SEPARATOR.join(str(p) for p in path) if path else "value"
            out.append(Leaf(key, path, node, conditions))
        elif isinstance(node, Conditional):
            self._collect(node.spec, path, (*conditions, node.when), out)
        elif isinstance(node, Mapping):
            for name, child in node.items():
                if not isinstance(name, str) or KEY_SEPARATOR in name:
                    raise SpaceError(
                        f"parameter names must be strings without {KEY_SEPARATOR!r}, got {name!r}"
                    )
                self._collect(child, (*path, name), conditions, out)
        elif isinstance(node, (list, tuple)):
            for i, child in enumerate(node):
                self._collect(child, (*path, i), conditions, out)

    def __len__(self) -> int:
        return len(self.leaves)

    @property
    def params(self) -> tuple[Parameter, ...]:
        return tuple(leaf.param for leaf in self.leaves)

    @property
    def has_continuous(self) -> bool:
        return any(leaf.param.is_continuous for leaf in self.leaves)

    def cardinality(self) -> float:
        """Number of gene combinations before constraints (inf with a continuous parameter)."""
        total = 1.0
        for leaf in self.leaves:
            total *= leaf.param.cardinality()
        return total

    # -- genes ↔ configurations ----------------------------------------------------------------
    def flat(self, genes: Genes) -> dict[str, Any]:
        """Flat configuration of the active, present parameters: ``{"tile/BM": 64, …}``."""
        out: dict[str, Any] = {}
        for leaf, gene in zip(self.leaves, genes, strict=True):
            if gene is KNOCKED_OUT:
                continue
            if leaf.conditions and not all(c.holds(out) for c in leaf.conditions):
                continue
            out[leaf.key] = leaf.param.decode(gene)
        return out

    def decode(self, genes: Genes) -> Any:
        """The nested configuration the objective receives."""
        flat = self.flat(genes)
        return _rebuild(self.spec, (), flat)

    def encode(self, config: Any, *, fill_defaults: bool = False) -> Genes:
        """Genes of a nested configuration (a warm-start point, a baseline, a preset).

        A parameter missing from `config` is knocked out when it can be, or set to its default
        when `fill_defaults` is true; otherwise it is an error naming the parameter.
        """
        flat = _flatten_config(self.spec, config, ())
        genes: list[Gene] = []
        for leaf in self.leaves:
            if leaf.key in flat:
                try:
                    genes.append(leaf.param.encode(flat.pop(leaf.key)))
                except SpaceError as exc:
                    raise SpaceError(f"parameter `{leaf.key}`: {exc}") from exc
            elif fill_defaults:
                genes.append(leaf.param.default())
            elif leaf.param.knockout_prob is not None:
                genes.append(KNOCKED_OUT)
            elif leaf.conditions:  # absent because inactive; its gene does not matter
                genes.append(leaf.param.default_present())
            else:
                raise SpaceError(
                    f"configuration {config!r} has no value for parameter `{leaf.key}`; give one "
                    "or pass fill_defaults=True to use the parameter's default"
                )
        if flat:
            raise SpaceError(f"configuration names keys that are not parameters: {sorted(flat)}")
        return tuple(genes)

    def key(self, genes: Genes) -> str:
        """Identity of the configuration: equal for genes that decode to the same config."""
        text = json.dumps(self.flat(genes), sort_keys=True, separators=(",", ":"))
        return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()

    def is_feasible(self, genes: Genes) -> bool:
        if not self.constraints:
            return True
        flat = self.flat(genes)
        return all(c.holds(flat) for c in self.constraints)

    def to_unit(self, genes: Genes) -> np.ndarray:
        """Genes as a vector in [0, 1] (-1 for knocked out), for distances and models."""
        return np.array([leaf.param.to_unit(g) for leaf, g in zip(self.leaves, genes, strict=True)])

    @property
    def has_seed_ranges(self) -> bool:
        """Whether a parameter restricts its first draws to a seed range."""
        return any(getattr(leaf.param, "_seed_indices", None) is not None for leaf in self.leaves)

    def in_seed_ranges(self, genes: Genes) -> bool:
        """Whether every gene lies in its parameter's seed range (where one is set)."""
        return all(leaf.param.in_seed_range(g) for leaf, g in zip(self.leaves, genes, strict=True))

    def default_genes(self) -> Genes:
        return tuple(leaf.param.default() for leaf in self.leaves)

    # -- sampling ------------------------------------------------------------------------------
    def sample_genes(self, rng: np.random.Generator, *, seeded: bool = False) -> Genes:
        """One feasible gene vector drawn at random (within seed ranges when `seeded`)."""
        for _ in range(MAX_SAMPLE_TRIES):
            genes = tuple(leaf.param.sample(rng, seeded=seeded) for leaf in self.leaves)
            if self.is_feasible(genes):
                return genes
        raise ConstraintError(
            f"no feasible configuration in {MAX_SAMPLE_TRIES} random draws; the constraints "
            f"{[c.rule for c in self.constraints]} may be contradictory or too tight"
        )

    def iter_genes(self) -> Iterator[Genes]:
        """Every feasible gene vector (finite spaces of at most MAX_ENUMERATION combinations)."""
        if self.cardinality() > MAX_ENUMERATION:
            raise SpaceError(
                f"the space has {self.cardinality():.3g} combinations, more than {MAX_ENUMERATION} "
                "that may be enumerated"
            )
        for genes in itertools.product(*self._states()):
            if self.is_feasible(genes):
                yield genes

    def enumerate_genes(
        self, limit: int = MAX_ENUMERATION, *, start: int = 0
    ) -> Iterator[tuple[int, Genes]]:
        """Every distinct feasible configuration's genes, once each, in a fixed order.

        The rows of the product of every parameter's states (`iter_genes`' order) are numbered
        from 0. A row is yielded with its number when it is feasible and each parameter it
        leaves inactive (a `conditional` whose condition fails) sits at its first state: rows
        that decode to the same configuration (equal `key`) differ only in inactive genes, so
        each configuration comes once, with no set of keys kept, and a listing can resume
        from a row number (an engine's cursor) without replaying the rows before it.

        Args:
            limit: most rows (gene combinations before constraints) the space may have.
            start: the first row looked at; `start=row + 1` resumes after a yielded `row`.

        Raises:
            SpaceError: the space has a continuous parameter or more than `limit` rows (raised
                by this call, before the first row).
        """
        for leaf in self.leaves:
            if leaf.param.is_continuous:
                raise SpaceError(
                    f"cannot enumerate the space: parameter `{leaf.key}` is continuous "
                    f"({leaf.param.kind}), and only spaces of listed values can be enumerated"
                )
        if self.cardinality() > limit:
            raise SpaceError(
                f"cannot enumerate the space: it has {self.cardinality():.4g} gene combinations "
                f"before constraints, more than limit={limit}"
            )
        return self._distinct_rows(start)

    def _distinct_rows(self, start: int) -> Iterator[tuple[int, Genes]]:
        states = self._states()
        # Per parameter: its flat key, its parameter, its conditions, its first state.
        plan = [
            (leaf.key, leaf.param, leaf.conditions, s[0])
            for leaf, s in zip(self.leaves, states, strict=True)
        ]
        rows = itertools.islice(itertools.product(*states), start, None)  # skipped in C
        for row, genes in enumerate(rows, start):
            flat: dict[str, Any] = {}  # `flat(genes)`, built as the row is checked
            for (key, param, conditions, first), gene in zip(plan, genes, strict=True):
                if conditions and not all(c.holds(flat) for c in conditions):
                    if gene != first:  # an inactive gene off its first state: a repeat
                        break
                elif gene is not KNOCKED_OUT:
                    flat[key] = param.decode(gene)
            else:
                if all(c.holds(flat) for c in self.constraints):
                    yield row, genes

    def _states(self) -> list[list[Gene]]:
        """Every gene of each parameter (a discrete space's), in order, knocked out last."""
        states = []
        for leaf in self.leaves:
            present = leaf.param.default_present()
            reach = int(min(leaf.param.cardinality(), sys.maxsize))
            own = {present, *leaf.param.neighbors(present, radius=reach)}
            states.append(sorted(own, key=lambda g: (g is None, g)))
        return states

    def sample(self, n: int, *, seed: int | None = None) -> list[Any]:
        """Draw `n` distinct feasible configurations without evaluating them."""
        if not isinstance(n, int) or n < 1:
            raise SpaceError(f"`n` must be a positive integer, got n={n!r}")
        rng = np.random.default_rng(seed)
        seen: set[str] = set()
        configs: list[Any] = []
        misses = 0
        while len(configs) < n and misses < MAX_SAMPLE_TRIES:
            genes = self.sample_genes(rng)
            key = self.key(genes)
            if key in seen:
                misses += 1
                continue
            seen.add(key)
            configs.append(self.decode(genes))
        if len(configs) < n:
            raise SpaceError(
                f"asked for {n} distinct configurations but the space yielded only {len(configs)}"
            )
        return configs

    # -- persistence ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe description: expressions as text, module-level functions as
        ``"module:function"`` references, other callables (lambdas, closures) pickled; the
        last two load back only with ``from_dict(..., allow_pickle=True)``."""
        return {
            "spec": _spec_to_json(self.spec),
            "constraints": [_constraint_to_json(c) for c in self.constraints],
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        allow_pickle: bool = False,
        source: str | os.PathLike[str] | None = None,
    ) -> SearchSpace:
        """Rebuild a space from `to_dict` output.

        Loading is inert: expressions are parsed and checked, and a constraint saved as code —
        a ``"module:function"`` reference or a pickled callable — is refused, since importing
        or unpickling runs code named by the data.

        Args:
            data: the saved space.
            allow_pickle: trust the data as much as this program (e.g. its own checkpoint):
                also import ``"module:function"`` references (functions of your own code, not
                the standard library) and unpickle callables (lambdas, closures).
            source: the file `data` was read from, named at the start of every error.

        Raises:
            SpaceError: malformed data, or a constraint saved as code without `allow_pickle`
                (one line naming `source`, the field and the rule).
        """
        try:
            if not isinstance(data, Mapping):
                raise SpaceError(f"a saved search space is a mapping, got {type(data).__name__}")
            try:
                spec = _spec_from_json(data["spec"], allow_pickle, "spec")
                constraints = [
                    _constraint_from_json(c, allow_pickle, f"constraints[{i}]")
                    for i, c in enumerate(data.get("constraints", []))
                ]
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                if isinstance(exc, SpaceError):
                    raise
                raise SpaceError(f"not a saved search space: {exc!r}") from None
            return cls(spec, constraints=constraints)
        except SpaceError as exc:
            if source is None:
                raise
            raise type(exc)(f"{os.fspath(source)}: {exc}") from None

    def __repr__(self) -> str:
        return f"SearchSpace({len(self)} parameters: {', '.join(self.keys)})"


def _aliases(keys: Sequence[str]) -> dict[str, str]:
    """Names usable in expressions: the last part of a key when unique, and identifier keys."""
    last = [k.split(KEY_SEPARATOR)[-1] for k in keys]
    aliases = {name: key for name, key in zip(last, keys, strict=True) if last.count(name) == 1}
    aliases.update({k: k for k in keys if k.isidentifier()})
    return {n: k for n, k in aliases.items() if n.isidentifier()}


def _rebuild(node: Any, path: tuple[str | int, ...], flat: dict[str, Any]) -> Any:
    """Nested config for `node`, or `_ABSENT` when every parameter below it is absent."""
    if isinstance(node, Conditional):
        return _rebuild(node.spec, path, flat)
    if isinstance(node, Parameter):
        key = KEY_SEPARATOR.join(str(p) for p in path) if path else "value"
        return flat.get(key, _ABSENT)
    if isinstance(node, Mapping):
        out = {}
        for name, child in node.items():
            value = _rebuild(child, (*path, name), flat)
            if value is not _ABSENT:
                out[name] = value
        return out
    if isinstance(node, (list, tuple)):
        items = [_rebuild(child, (*path, i), flat) for i, child in enumerate(node)]
        return [v for v in items if v is not _ABSENT]
    return node


_ABSENT = object()


def _flatten_config(node: Any, config: Any, path: tuple[str | int, ...]) -> dict[str, Any]:
    """Flat {key: value} of a nested configuration, matched against the spec `node`."""
    key = KEY_SEPARATOR.join(str(p) for p in path) if path else "value"
    if isinstance(node, Conditional):
        return _flatten_config(node.spec, config, path)
    if isinstance(node, Parameter):
        return {key: config}
    if isinstance(node, Mapping):
        if not isinstance(config, Mapping):
            raise SpaceError(f"expected a dict at `{key}`, got {config!r}")
        out: dict[str, Any] = {}
        for name, value in config.items():
            if name not in node:
                raise SpaceError(
                    f"configuration key `{KEY_SEPARATOR.join(map(str, (*path, name)))}`"
                    " is not in the search space"
                )
            out.update(_flatten_config(node[name], value, (*path, name)))
        return out
    if isinstance(node, (list, tuple)):
        if not isinstance(config, (list, tuple)):
            raise SpaceError(f"expected a list at `{key}`, got {config!r}")
        # Items of a list may be knocked out, so match config items to spec items in order.
        out, remaining = {}, list(config)
        for i, child in enumerate(node):
            if remaining and _matches(child, remaining[0]):
                out.update(_flatten_config(child, remaining.pop(0), (*path, i)))
        if remaining:
            raise SpaceError(f"list at `{key}` has items that match no parameter: {remaining!r}")
        return out
    return {}


def _matches(node: Any, value: Any) -> bool:
    """Whether `value` can be the configuration of spec `node`."""
    try:
        if isinstance(node, Conditional):
            return _matches(node.spec, value)
        if isinstance(node, Parameter):
            node.encode(value)
            return True
        if isinstance(node, (Mapping, list, tuple)):
            _flatten_config(node, value, ())
            return True
    except SpaceError:
        return False
    return bool(node == value)


def _spec_to_json(node: Any) -> Any:
    if isinstance(node, Parameter):
        return {"$param": node.to_dict()}
    if isinstance(node, Conditional):
        return {
            "$conditional": {
                "when": _constraint_to_json(node.when),
                "spec": _spec_to_json(node.spec),
            }
        }
    if isinstance(node, Mapping):
        return {"$dict": {k: _spec_to_json(v) for k, v in node.items()}}
    if isinstance(node, (list, tuple)):
        return {"$list": [_spec_to_json(v) for v in node]}
    return {"$const": node}


def _spec_from_json(node: Any, allow_pickle: bool, where: str) -> Any:
    """The spec saved at `node`; `where` is its field in the saved data, for errors."""
    ((tag, body),) = node.items()
    where = f"{where}.{tag}"
    if tag == "$param":
        return parameter_from_dict(body)
    if tag == "$conditional":
        when = _constraint_from_json(body["when"], allow_pickle, f"{where}.when").rule
        return Conditional(_spec_from_json(body["spec"], allow_pickle, f"{where}.spec"), when)
    if tag == "$dict":
        return {k: _spec_from_json(v, allow_pickle, f"{where}.{k}") for k, v in body.items()}
    if tag == "$list":
        return [_spec_from_json(v, allow_pickle, f"{where}[{i}]") for i, v in enumerate(body)]
    if tag == "$const":
        return body
    raise SpaceError(f"field `{where}`: unknown node {tag!r} in a saved search space")


def _constraint_to_json(constraint: Constraint) -> dict[str, str]:
    text = constraint.to_json()
    if text is not None:
        return {"expr": text}
    reference = _reference(constraint.rule)
    if reference is not None:
        return {"ref": reference}
    try:
        import cloudpickle  # a dependency of ray; callables (lambdas) need it to be stored
    except ImportError as exc:  # pragma: no cover - ray is a dependency
        raise SpaceError("saving a callable constraint needs cloudpickle; use a string") from exc
    return {"pickled": base64.b64encode(cloudpickle.dumps(constraint.rule)).decode()}


def _constraint_from_json(data: Mapping[str, str], allow_pickle: bool, where: str) -> Constraint:
    """The constraint saved at field `where`; one saved as code only when `allow_pickle`."""
    if "expr" in data:
        return Constraint(data["expr"])
    if "ref" in data:
        if not allow_pickle:
            raise SpaceError(
                f"field `{where}.ref`: the saved constraint names a function to import and call "
                f"({str(data['ref'])[:200]!r}), and loading a saved space never runs code; write "
                'the constraint as an expression ("BM * BN <= 65536"), or build the SearchSpace '
                "in Python with the function (SearchSpace.from_dict(..., allow_pickle=True) "
                "imports it from data you trust)"
            )
        return Constraint(_resolve_reference(data["ref"]))
    if "pickled" not in data:
        raise SpaceError(
            f"field `{where}`: a saved constraint has `expr` or `ref`, got keys {sorted(data)}"
        )
    if not allow_pickle:
        raise SpaceError(
            f"field `{where}.pickled`: the saved search space holds a pickled constraint, and "
            "unpickling runs code named by the file; write the constraint as an expression "
            '("BM * BN <= 65536"), or build the SearchSpace in Python with the function, or '
            "pass allow_pickle=True if you trust the file"
        )
    import pickle

    return Constraint(pickle.loads(base64.b64decode(data["pickled"])))


def _reference(rule: Any) -> str | None:
    """``"module:function"`` naming `rule` when importing it gives the same object, else None."""
    module = getattr(rule, "__module__", None)
    name = getattr(rule, "__qualname__", None)
    if not module or not name or module == "__main__" or not name.isidentifier():
        return None
    try:
        found = _resolve_reference(f"{module}:{name}")
    except SpaceError:
        return None
    return f"{module}:{name}" if found is rule else None


def _resolve_reference(reference: str) -> Callable[[Mapping[str, Any]], bool]:
    module, _, name = reference.partition(":")
    if not _REFERENCE.match(reference):
        raise SpaceError(
            f"a saved constraint reference must look like 'module:function', got {reference!r}"
        )
    # A standard-library function called with a configuration could act on it (subprocess.call
    # runs a dict's keys), so references name the user's own Python functions only.
    if module.split(".")[0] in sys.stdlib_module_names:
        raise SpaceError(
            f"saved constraint {reference!r} names a standard-library module; a reference names "
            "a function of your own code"
        )
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SpaceError(f"saved constraint {reference!r} cannot be imported: {exc}") from None
    if not isinstance(found, types.FunctionType):
        raise SpaceError(f"saved constraint {reference!r} is not a Python function")
    rule: Callable[[Mapping[str, Any]], bool] = found
    return rule
