"""A kernel as its project ships it, launched on a description's inputs: the outputs of
``reference: shipped`` (the check of every candidate against the project's own launch)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING
from typing import Any

from objectives.triton_entry import kernel_entry
from objectives.triton_entry import load_module

if TYPE_CHECKING:
    import torch

    from objectives.description import KernelDescription


def copy_laid_out(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of `tensor` with its strides (a view of a buffer, `InputSpec.strides`, is copied
    with its buffer; `clone` would make a broadcast or sliced input contiguous)."""
    import torch

    base = tensor._base
    if base is None:
        return tensor.clone()
    return torch.as_strided(
        base.clone(), tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset()
    )


def shipped_outputs(desc: KernelDescription, tensors: Mapping[str, Any]) -> list[Any]:
    """The outputs of the kernel launched as its project ships it (``reference: shipped``):
    the entry as its source defines it, its own `@triton.heuristics` choosing (and its
    `@triton.autotune`'s first configuration, `_launch_once`), on copies of `tensors`, with the
    description's arguments and scalars and its grid at the parameters the shipped launch
    chose (the defaults where it chose none)."""
    from objectives import make_search_space

    space = make_search_space(desc)
    defaults = space.decode(space.default_genes()).get("params", {})
    entry = kernel_entry(str(desc.source), str(desc.entry))
    shipped = getattr(load_module(str(desc.source)), str(desc.entry))
    copies = {name: copy_laid_out(tensor) for name, tensor in tensors.items()}
    # Bound as the search binds, without the heuristics: the shipped launch runs its own.
    args, named = replace(entry, heuristics=()).bind(
        copies, {**desc.launch_arguments(), **desc.scalars}
    )

    def grid(meta: Mapping[str, Any]) -> tuple[int, ...]:
        # The shipped autotuner's own choice of a parameter the grid depends on.
        return desc.launch({**defaults, **{k: meta[k] for k in defaults if k in meta}})["grid"]

    _launch_once(shipped, grid, args, named)
    return [copies[name] for name in desc.outputs]


def _launch_once(shipped: Any, grid: Any, args: list[Any], named: dict[str, Any]) -> None:
    """Launch the shipped kernel once. Under its own `@triton.autotune` of several
    configurations it runs the first, as Triton runs a one-configuration autotuner (its
    ``pre_hook`` first): every configuration computes the same outputs, and timing them all at
    each shape in every worker costs seconds of GPU time."""
    from triton.runtime.autotuner import Autotuner

    if not isinstance(shipped, Autotuner) or len(shipped.configs) < 2:
        shipped[grid](*args, **named)
        return
    config = shipped.configs[0]
    chosen = config.all_kwargs()
    if config.pre_hook is not None:
        config.pre_hook({**dict(zip(shipped.arg_names, args, strict=False)), **named, **chosen})
    shipped.fn[grid](*args, **named, **chosen)
