"""A trial's configuration split into kernel parameters and per-catalog controls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from objectives.description import KernelDescription


def split_config(
    desc: KernelDescription, config: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Split a trial's configuration into kernel parameters and per-catalog controls.

    Accepts the nested form of `objectives.make_search_space`
    (``{"params": {"BLOCK_M": 64}, "controls": {"triton": {"num_warps": 4}}}``) and the same
    with "/"-joined keys (``{"controls/triton/num_warps": 4}``); knocked-out controls are absent.

    Raises:
        ValueError: If `config` names something that is not a parameter or catalog of `desc`.
    """
    nested: dict[str, Any] = {}
    for key, value in config.items():
        *path, leaf = key.split("/")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    params = dict(nested.pop("params", {}))
    controls = dict(nested.pop("controls", {}))
    unknown = [
        *(f"top-level {k!r}" for k in nested),
        *(f"params/{k}" for k in params if k not in desc.params),
        *(f"controls/{k}" for k in controls if k not in desc.controls),
    ]
    if unknown:
        raise ValueError(
            f"configuration names {unknown}, which are not in {desc.name!r} (params "
            f"{sorted(desc.params)}, controls {sorted(desc.controls)})"
        )
    return params, {k: dict(controls.get(k) or {}) for k in desc.controls}
