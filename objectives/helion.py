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
import hashlib
import importlib.util
import itertools
import json
import math
import os
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ciq_tune.errors import DescriptionError
from ciq_tune.space import SearchSpace
from objectives._bench import check_and_time
from objectives._bench import make_inputs
from objectives._isolate import run_isolated
from objectives.description import KernelDescription

TARGET = "objectives.helion:evaluate"
SPACE_TARGET = "objectives.helion:derive_space"
_PRELOAD = ("torch", "helion")

Slot = tuple[str, Any]
"""One flat slot of a Helion config spec: its parameter name and its Helion fragment."""


# -- Ray side ----------------------------------------------------------------------------------


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
    if description.kind != "helion":
        raise ValueError(f"`description.kind` must be 'helion', got kind={description.kind!r}")
    data = description.model_dump(mode="json")
    return functools.partial(_trainable, data, energy)


def _trainable(data: dict[str, Any], energy: bool, config: dict[str, Any]) -> dict[str, Any]:
    desc = KernelDescription.model_validate(data)
    return evaluate_isolated(desc, config, energy=energy)


def evaluate_isolated(
    desc: KernelDescription, config: Mapping[str, Any], *, energy: bool = False
) -> dict[str, Any]:
    """Evaluate one configuration (``{"params": {"block_sizes_0": 64, …}}``) in the isolated
    worker (see `make_trainable`)."""
    try:
        params = split_params(config)
    except ValueError as exc:
        return {"status": "crash", "time_ms": math.nan, "error": str(exc)}
    payload = {"description": desc.model_dump(mode="json"), "params": params, "energy": energy}
    result = _run_in_worker(TARGET, payload, desc)
    result.setdefault("time_ms", math.nan)
    return result


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
    result = _run_in_worker(SPACE_TARGET, {"description": desc.model_dump(mode="json")}, desc)
    if result.get("status") != "ok":
        raise DescriptionError(
            f"{desc.path}: cannot derive the search space of Helion kernel {desc.entry!r} from "
            f"{desc.source}: {result.get('status')}: {result.get('error')}"
        )
    return json.dumps(result["params"])


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


def _run_in_worker(target: str, payload: dict[str, Any], desc: KernelDescription) -> dict[str, Any]:
    env = {} if _has_gpu() else {"TRITON_INTERPRET": "1"}
    return run_isolated(
        target,
        payload,
        compile_timeout_s=desc.timeouts.compile_s,
        run_timeout_s=desc.timeouts.run_s,
        env=env,
        preload=_PRELOAD,
    )


@functools.cache
def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# -- config spec ↔ params (pure; Helion fragments in, plain data out) --------------------------


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


# -- worker side -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedKernel:
    """A Helion kernel bound to a description's inputs, with its flat config layout.

    Attributes:
        bound: Helion's ``BoundKernel`` for the inputs' shapes and dtypes.
        generation: Helion's ``ConfigGeneration`` (flat ↔ Config, with the kernel's overrides).
        slots: ``(config key, parameter name, fragment)`` of every flat slot.
        defaults: Helion's default flat value of every slot.
        probe: Inputs the kernel was bound to; `compile_ahead` passes them (nothing runs).
    """

    bound: Any
    generation: Any
    slots: list[tuple[str, str, Any]]
    defaults: list[Any]
    probe: dict[str, Any]

    def config(self, params: Mapping[str, Any]) -> Any:
        """The ``helion.Config`` of a candidate's params (Helion repairs invalid combinations
        and applies the kernel's ``autotune_config_overrides``, as its own autotuner does)."""
        pairs = [(name, fragment) for _, name, fragment in self.slots]
        return self.generation.unflatten(flat_values(pairs, params, self.defaults))

    def searchable(self) -> tuple[list[Slot], list[Any]]:
        """Slots and defaults without the fields that the kernel's overrides fix."""
        fixed = self.bound.settings.autotune_config_overrides
        kept = [
            ((name, fragment), default)
            for (key, name, fragment), default in zip(self.slots, self.defaults, strict=True)
            if key not in fixed
        ]
        return [slot for slot, _ in kept], [default for _, default in kept]


def prepare(desc: KernelDescription, device: str) -> PreparedKernel:
    """Load the description's kernel, bind it to fresh inputs on `device` and read its spec
    (once per process and description)."""
    return _prepare(desc.model_dump_json(), device)


@functools.cache
def _prepare(description_json: str, device: str) -> PreparedKernel:
    desc = KernelDescription.model_validate_json(description_json)
    kernel = load_kernel(str(desc.source), str(desc.entry))
    probe = make_inputs(desc, seed=0, device=device)
    bound = kernel.bind(tuple(probe.values()))
    spec = bound.config_spec
    generation = spec.create_config_generation(overrides=bound.settings.autotune_config_overrides)
    fragments = iter(generation.flat_spec)
    slots = [
        (key, f"{key}_{i}" if is_sequence else key, next(fragments))
        for key, count, is_sequence in spec.flat_key_layout()
        for i in range(count)
    ]
    return PreparedKernel(bound, generation, slots, list(generation.default_flat()), probe)


@functools.cache
def load_kernel(source: str, entry: str) -> Any:
    """Import the kernel's module from its file and return its module-level ``helion.Kernel``."""
    import helion

    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    name = f"ciq_helion_kernel_{digest}"
    spec = importlib.util.spec_from_file_location(name, source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import kernel source {source!r}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = getattr(module, entry, None)
    if not isinstance(kernel, helion.Kernel):
        raise TypeError(
            f"`entry` {entry!r} of {source} is {type(kernel).__name__}, not a helion.Kernel; "
            "decorate a module-level function with @helion.kernel"
        )
    return kernel


def make_launch(
    desc: KernelDescription, config: Mapping[str, Any], *, device: str = "cuda"
) -> Callable[[Mapping[str, Any]], None]:
    """Compile one configuration in this process, for re-measurement outside the worker (the
    Triton objective's `make_launch` for Helion).

    Args:
        desc: The kernel description.
        config: A configuration of the search space (``{"params": {…}}``) or
            ``{"helion_config": {…}}``, a Config as Helion writes it (its autotuner's result,
            a trial's ``helion_config``).
        device: Where the kernel runs.

    Returns:
        ``launch(tensors)``, which runs the kernel on the description's inputs (in order).
    """
    import helion

    prepared = prepare(desc, device)
    if "helion_config" in config:
        helion_config = helion.Config(**config["helion_config"])
    else:
        helion_config = prepared.config(split_params(config))
    compiled = prepared.bound.compile_config(helion_config, allow_print=False)

    def launch(tensors: Mapping[str, Any]) -> None:
        compiled(*tensors.values())

    return launch


def derive_space(payload: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The worker's task behind `derived_params`: bind the kernel and convert its config spec."""
    desc = KernelDescription.model_validate(payload["description"])
    prepared = prepare(desc, _device())
    progress("compiled")
    slots, defaults = prepared.searchable()
    return {"status": "ok", "params": slot_params(slots, defaults)}


_candidates = 0


def evaluate(payload: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The worker's task: compile, check and time one candidate (see `objectives._isolate`).

    An invalid Config, a code-generation failure or a Triton compile failure (too much shared
    memory, say) is ``compile_error``; a wrong output is ``wrong_result``; an error while
    running escapes, so the isolated worker reports ``crash`` and replaces itself.
    """
    global _candidates
    _candidates += 1
    desc = KernelDescription.model_validate(payload["description"])
    device = _device()
    try:
        prepared = prepare(desc, device)  # once per worker: not part of compile_s
    except Exception as exc:  # a source that does not load or bind: every candidate fails
        return {"status": "compile_error", "time_ms": math.nan, "error": _short(exc)}
    t0 = time.perf_counter()
    try:
        config = prepared.config(payload["params"])
        compiled = prepared.bound.compile_config(config, allow_print=False)
        if device == "cuda":
            compile_ahead(compiled, prepared.probe)
    except Exception as exc:  # this candidate's fault only
        return {"status": "compile_error", "time_ms": math.nan, "error": _short(exc)}
    info = {
        "compile_s": time.perf_counter() - t0,
        "helion_config": json.dumps(config.config, sort_keys=True, default=str),
    }
    progress("compiled")

    def launch(tensors: Mapping[str, Any]) -> None:
        compiled(*tensors.values())

    # A different seed per candidate in this worker: every check sees new data.
    seed = 1_000_003 * _candidates + os.getpid()
    result = check_and_time(desc, launch, seed=seed, device=device, energy=payload["energy"])
    result.update(info)
    return result


def compile_ahead(compiled: Callable[..., Any], tensors: Mapping[str, Any]) -> None:
    """Compile a candidate's Triton kernels without running anything on the GPU.

    Helion's generated host function takes the launcher as ``_launcher``; this one asks Triton
    for a warm-up compile and loads the module (which fails on too much shared memory), so
    compile time and compile failures are measured alone and no kernel runs outside the
    benchmark.
    """

    def launcher(triton_kernel: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> None:
        kernel = triton_kernel.run(*args, grid=grid, warmup=True, **kwargs)
        kernel._init_handles()

    compiled(*tensors.values(), _launcher=launcher)


def _device() -> str:
    return "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    # Helion and Triton errors can carry whole generated sources; the head says what went wrong.
    return text if len(text) <= 2000 else text[:2000] + " …"
