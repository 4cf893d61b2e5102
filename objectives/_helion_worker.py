"""The Helion worker side (in the isolated process, where the GPU is): bind the kernel to the
description's inputs, derive its space, compile a Config ahead of the timed runs through
Helion's private ``_launcher`` hook, check and time it."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import math
import os
import time
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from objectives._bench import check_and_time
from objectives._bench import make_inputs
from objectives._helion_spec import Slot
from objectives._helion_spec import flat_values
from objectives._helion_spec import slot_params
from objectives._helion_spec import split_params
from objectives.description import KernelDescription


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
