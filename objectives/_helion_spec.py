"""Helion config spec ↔ ciq-tune params, pure: Helion fragments in, plain data out.

Each flat slot of a spec (Helion's `ConfigGeneration` layout) becomes one parameter named after
its Config field, with an index for list fields (``block_sizes_0``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

Slot = tuple[str, Any]
"""One flat slot of a Helion config spec: its parameter name and its Helion fragment."""


def slot_params(slots: Sequence[Slot], defaults: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Description `params` entries for Helion's flat config slots.

    Args:
        slots: ``(name, fragment)`` per flat slot, in Helion's flat order.
        defaults: Helion's default flat value of each slot (``ConfigGeneration.default_flat``).

    Returns:
        ``{name: {"ordinal" | "choice": values, "default": value}}``; a list slot (one value
        per load, say) gives one entry per element; a slot with a single value is left out
        (Helion's default fills it).

    Raises:
        ValueError: a fragment type that ciq-tune does not know (another Helion version).
    """
    params: dict[str, dict[str, Any]] = {}
    for (name, fragment), default in zip(slots, defaults, strict=True):
        items, _ = _slot_items(name, fragment, default)
        for item_name, item, item_default in items:
            values, ordered = _fragment_values(item_name, item)
            if len(values) < 2:
                continue
            if item_default is None and values[0] is not None:
                # A None default cannot be declared (it means "the first value"); choices are
                # unordered, so None moves to the front instead.
                values = [None, *(v for v in values if v is not None)]
            entry: dict[str, Any] = {"ordinal" if ordered else "choice": values}
            # A default outside the fragment's own bounds (not seen in Helion 1.2) falls back
            # to the first value rather than making the space invalid.
            if item_default is not None and item_default in values:
                entry["default"] = item_default
            params[item_name] = entry
    return params


def flat_values(
    slots: Sequence[Slot], params: Mapping[str, Any], defaults: Sequence[Any]
) -> list[Any]:
    """Helion's flat config (input of ``ConfigGeneration.unflatten``) for a candidate's params;
    slots the params leave out keep their default.

    Raises:
        ValueError: `params` names something that is no slot (or slot element).
    """
    flat: list[Any] = []
    known: set[str] = set()
    for (name, fragment), default in zip(slots, defaults, strict=True):
        items, is_list = _slot_items(name, fragment, default)
        values = [params.get(item_name, item_default) for item_name, _, item_default in items]
        known.update(item_name for item_name, _, _ in items)
        flat.append(values if is_list else values[0])
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"params {unknown} are not fields of this kernel's config spec")
    return flat


def _slot_items(name: str, fragment: Any, default: Any) -> tuple[list[tuple[str, Any, Any]], bool]:
    """A slot's searchable items ``(name, fragment, default)`` and whether the slot is a list
    (``ListOf``: one value per load or store, each searched on its own)."""
    from helion.autotuner.config_fragment import ListOf

    if isinstance(fragment, ListOf):
        items = [(f"{name}_{j}", fragment.inner, default[j]) for j in range(fragment.length)]
        return items, True
    return [(name, fragment, default)], False


def _fragment_values(name: str, fragment: Any) -> tuple[list[Any], bool]:
    """The values of one Helion fragment and whether their order matters (ordinal)."""
    from helion.autotuner.config_fragment import BooleanFragment
    from helion.autotuner.config_fragment import EnumFragment
    from helion.autotuner.config_fragment import IntegerFragment
    from helion.autotuner.config_fragment import PermutationFragment
    from helion.autotuner.config_fragment import PowerOfTwoFragment

    # Block sizes, num_warps, l2_groupings, num_sm_multiplier: powers of two within the bounds.
    if isinstance(fragment, PowerOfTwoFragment):
        low, high = fragment.low.bit_length() - 1, fragment.high.bit_length() - 1
        return [2**e for e in range(low, high + 1)], True
    if isinstance(fragment, IntegerFragment):
        return list(range(fragment.low, fragment.high + 1)), True
    if isinstance(fragment, BooleanFragment):
        return [False, True], False
    if isinstance(fragment, EnumFragment):
        return list(fragment.choices), False
    if isinstance(fragment, PermutationFragment):
        return [list(p) for p in itertools.permutations(range(fragment.length))], False
    raise ValueError(
        f"Helion config field `{name}` is a {type(fragment).__name__}, which ciq-tune cannot "
        "convert to a search parameter; use helion 1.2.x (`pip install 'ciq-tune[helion]'`)"
    )


def split_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``params`` of a configuration, nested (``{"params": {…}}``) or "/"-joined
    (``{"params/num_warps": 4}``). An empty ``controls`` (the other kinds' shape) is accepted.

    Raises:
        ValueError: `config` holds anything else.
    """
    params: dict[str, Any] = {}
    unknown = []
    for key, value in config.items():
        if key == "params" and isinstance(value, Mapping):
            params.update(value)
        elif key.startswith("params/"):
            params[key.removeprefix("params/")] = value
        elif not (key == "controls" and not value):
            unknown.append(key)
    if unknown:
        raise ValueError(
            f"configuration names {unknown}; a Helion configuration has only `params` (Helion "
            "Config fields such as `block_sizes_0`), no compiler-control catalogs"
        )
    return params
