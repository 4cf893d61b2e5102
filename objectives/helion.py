"""Helion trainable: compile a ``@helion.kernel`` with a candidate Config, check it, time it.

The search space comes from Helion itself: the kernel is bound to the description's inputs (in
the isolated worker, where the GPU is) and its config spec is flattened the way Helion's own
autotuner flattens it (`helion.autotuner.ConfigGeneration`). Each flat slot becomes one
parameter named after its Config field, with an index for list fields: ``block_sizes_0``,
``num_warps``, ``indexing_2``. Block sizes, warps and the other power-of-two fields are ordinals
over the powers of two within the spec's bounds; enums, booleans and loop orders are choices.
A candidate goes back through Helion's ``unflatten`` (which also applies the kernel's
``autotune_config_overrides``), so ciq-tune evaluates exactly the Configs Helion's autotuner
would.

Helion is imported only inside the worker and by the conversion functions, never at load time.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from ciq_tune.errors import DescriptionError
from ciq_tune.space import SearchSpace
from objectives import _trainable
from objectives._helion_spec import split_params
from objectives.description import KernelDescription

TARGET = "objectives._helion_worker:evaluate"
SPACE_TARGET = "objectives._helion_worker:derive_space"


def make_trainable(
    description: KernelDescription, *, energy: bool = False
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A Ray Tune function trainable that evaluates one Config of a Helion kernel.

    The trainable returns one result dict, with the same metrics as the Triton objective
    (``status``, ``time_ms``, the timing statistics, ``compile_s``, ``rel_err``…) plus
    ``helion_config``, the evaluated Config as JSON. Failures are data, never exceptions.
    Without a GPU the worker runs Helion's generated Triton code under Triton's interpreter
    (``TRITON_INTERPRET=1``), which checks correctness and times with the host clock.

    Args:
        description: The kernel description (``kind: helion``).
        energy: Also report NVML energy per call (``energy_mj``) and power (``power_w``).

    Returns:
        ``trainable(config) -> result`` for configurations of `make_search_space`, picklable.
    """
    return _trainable.make_trainable(description, WORKER, energy=energy)


def _payload(desc: KernelDescription, config: Mapping[str, Any]) -> dict[str, Any]:
    return {"params": split_params(config)}


WORKER = _trainable.WorkerKind(
    kind="helion",
    target=TARGET,
    payload=_payload,
    preload=("torch", "helion"),
    interpret_without_gpu=True,
)


def make_search_space(description: KernelDescription) -> SearchSpace:
    """The Helion kernel's search space: derived params, replaced by the description's own.

    An entry of the description's `params` replaces the derived parameter of the same name
    (to narrow a range, or pin a field with a one-value choice); the rest stay as derived.
    The derived defaults (Helion's default Config) are the space's default, so
    `objectives.starting_points` starts from Helion's default.

    Raises:
        DescriptionError: the space cannot be derived (kernel not loadable or not bindable to
            the inputs), or `params` names a field Helion does not search for these inputs.
    """
    derived = derived_params(description)
    unknown = sorted(set(description.params) - set(derived))
    if unknown:
        raise DescriptionError(
            f"{description.path}: `params` {unknown} are not searchable fields of Helion kernel "
            f"{description.entry!r} for these inputs; searchable: {sorted(derived)} (fields "
            "fixed by the kernel's autotune_config_overrides are not searchable)"
        )
    merged = {**derived, **description.params}
    params = description.model_copy(update={"params": merged}).param_space()
    return SearchSpace({"params": params}, constraints=description.constraints)


def derived_params(description: KernelDescription) -> dict[str, dict[str, Any]]:
    """The kernel's config spec as description `params` entries (``{"ordinal": […],
    "default": …}``), derived once per process and description in the isolated worker."""
    return json.loads(_derived_params_json(description.model_dump_json()))


@functools.cache
def _derived_params_json(description_json: str) -> str:
    desc = KernelDescription.model_validate_json(description_json)
    result = _trainable.run_in_worker(
        WORKER, desc, SPACE_TARGET, {"description": desc.model_dump(mode="json")}
    )
    if result.get("status") != "ok":
        raise DescriptionError(
            f"{desc.path}: cannot derive the search space of Helion kernel {desc.entry!r} from "
            f"{desc.source}: {result.get('status')}: {result.get('error')}"
        )
    return json.dumps(result["params"])
