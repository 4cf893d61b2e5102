"""Re-measurement of named configurations of one kernel: checked, then interleaved rounds of the
measurement protocol, compared pairwise with a reference variant.

The one re-measurement the CLI (`ciq-tune verify`), the GPU suite and the benchmark scripts use.
Every variant is timed with `objectives.protocol.measure_round` on the same rotating input sets
(`objectives._bench.timing_sets`) as a trial of the search, so a configuration's re-measured value
and its in-search value are draws of the same quantity. Rounds are interleaved and their order
rotates every round; each round's median, SM clock and temperature are kept.
"""

from __future__ import annotations

import contextlib
import importlib
import math
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Protocol

import numpy as np

from ciq_tune.errors import MeasurementError
from ciq_tune.validation import ValidationConfig
from ciq_tune.validation import compare_samples
from ciq_tune.validation import median_ci
from objectives._arrays import ArrayLibrary
from objectives._arrays import arrays_for
from objectives._arrays import evaluate_expression
from objectives._bench import compare
from objectives._bench import make_inputs
from objectives._bench import reference_outputs
from objectives._bench import timing_sets
from objectives.description import KernelDescription
from objectives.protocol import DEFAULT_PROTOCOL
from objectives.protocol import MeasurementProtocol
from objectives.protocol import measure_round

ALTERNATIVE = "alternative"
"""The variant name under which `remeasure` takes a description's `alternative` (None config)."""
# Seed of the inputs each variant is checked on before it is timed.
CHECK_SEED = 4242

Launch = Callable[[Mapping[str, Any]], Any]


class RoundTimer(Protocol):
    """Times one round of ``run(i)`` over ``n_rotate`` input sets with the kernel's array
    library and returns its value in ms (`objectives.graph_timing.time_cuda_graph`)."""

    def __call__(
        self, run: Callable[[int], object], n_rotate: int, *, arrays: ArrayLibrary
    ) -> float: ...


@dataclass
class VariantMeasurement:
    """One variant's rounds.

    Attributes:
        config: The configuration (None for the description's alternative).
        samples_ms: One value per round (the round's median), in round order.
        sm_clock_mhz: The SM clock after each round (None entries without NVML).
        temperature_c: The temperature after each round, °C.
        rel_err: Relative error of the check on fresh inputs.
    """

    config: Any
    rel_err: float
    samples_ms: list[float] = field(default_factory=list)
    sm_clock_mhz: list[float | None] = field(default_factory=list)
    temperature_c: list[float | None] = field(default_factory=list)

    def summary(self, config: ValidationConfig) -> dict[str, Any]:
        """Median of the rounds with its bootstrap CI, spread, and the conditions' range."""
        arr = np.asarray(self.samples_ms)
        low, high = median_ci(self.samples_ms, config=config)
        q25, q75 = np.percentile(arr, [25, 75])
        clocks = [c for c in self.sm_clock_mhz if c is not None]
        temps = [t for t in self.temperature_c if t is not None]
        return {
            "median_ms": float(np.median(arr)),
            "median_ci_low_ms": low,
            "median_ci_high_ms": high,
            "iqr_ms": float(q75 - q25),
            "cv": float(arr.std(ddof=1) / arr.mean()) if arr.size > 1 else 0.0,
            "rounds": int(arr.size),
            "sm_clock_mhz": [min(clocks), max(clocks)] if clocks else None,
            "temperature_c": [min(temps), max(temps)] if temps else None,
        }


def make_launch(desc: KernelDescription, config: Any, *, device: str) -> Launch:
    """The launch function of one configuration in this process (compiles it), or of the
    description's alternative when `config` is None (returns its output).

    Raises:
        ValueError: `config` is None and the description has no `alternative`.
    """
    if config is None:
        return alternative_launch(desc)
    module = importlib.import_module(f"objectives.{desc.kind}")
    if desc.kind == "cuda":
        launch: Launch = module.make_launch(desc, config)
        return launch
    launch = module.make_launch(desc, config, device=device)
    return launch


def alternative_launch(desc: KernelDescription) -> Launch:
    """The description's `alternative` as a launch function (compiled once, evaluated per call;
    over torch tensors, or CuPy arrays for a CUDA C++ kernel).

    Raises:
        ValueError: the description has no `alternative`.
    """
    if desc.alternative is None:
        raise ValueError(f"kernel {desc.name!r} has no `alternative` to compare with")
    code = compile(desc.alternative.expression, f"<{desc.name} alternative>", "eval")
    names = {**arrays_for(desc.kind).reference_names(), "math": math, **desc.sizes}

    def launch(tensors: Mapping[str, Any]) -> Any:
        args = {k: v for k, v in tensors.items() if k not in desc.outputs}
        return evaluate_expression(code, {**names, **args})

    return launch


def check(desc: KernelDescription, launch: Launch, *, returns_output: bool, device: str) -> float:
    """Run `launch` once on fresh inputs and compare its first output with the reference.

    Returns:
        The relative error.

    Raises:
        RuntimeError: the output is wrong.
    """
    arrays = arrays_for(desc.kind)
    tensors = make_inputs(desc, seed=CHECK_SEED, device=device, arrays=arrays)
    expected = reference_outputs(desc, tensors, arrays)
    for name in desc.outputs:
        arrays.poison_(tensors[name])
    value = launch(tensors)
    if device == "cuda":
        arrays.synchronize()
    got = value if returns_output else tensors[desc.outputs[0]]
    got = got[0] if isinstance(got, tuple | list) else got
    result = compare(
        got, expected[0], rtol=desc.tolerance.rtol, atol=desc.tolerance.atol, arrays=arrays
    )
    if not result.ok:
        raise RuntimeError(f"wrong on fresh inputs: {result.message}")
    return result.rel_err


def remeasure(
    desc: KernelDescription,
    variants: Mapping[str, Any],
    *,
    rounds: int,
    warmup_rounds: int,
    device: str,
    reference: str = "tuned",
    protocol: MeasurementProtocol = DEFAULT_PROTOCOL,
    settings: ValidationConfig | None = None,
    round_timer: RoundTimer | None = None,
) -> dict[str, Any]:
    """Check every variant, time them in interleaved rounds, compare each with `reference`.

    Args:
        desc: The kernel description.
        variants: name → configuration (``{"params": ..., "controls": ...}``), or None for the
            description's alternative.
        rounds: Timed rounds per variant (after `warmup_rounds` untimed ones).
        warmup_rounds: Untimed rounds of every variant first.
        device: ``"cuda"``, or ``"cpu"`` under ``TRITON_INTERPRET=1`` (host clock).
        reference: The variant every other one is compared with (paired statistics, Bonferroni
            over the comparisons).
        protocol: The round's settings (the search's by default).
        settings: Thresholds of the comparisons (default `ValidationConfig()`).
        round_timer: Another timing method for the rounds (``ciq-tune verify``'s CUDA graph
            timer); by default a round is `measure_round` under `protocol`.

    Returns:
        ``variants`` (name → `VariantMeasurement.summary` plus ``config``, ``rel_err`` and
        ``samples_ms``), ``comparisons`` (``"<reference>_vs_<name>"`` → the statistics of
        `compare_samples`, speedup of the reference over the variant), ``skipped`` (name → why:
        a variant that fails to build or check does not cost the others their numbers),
        ``rounds``, ``warmup_rounds``, ``timer`` and ``protocol``.

    Raises:
        RuntimeError: the reference variant could not be checked.
        ValueError: fewer than 3 rounds.
    """
    from objectives._gpu import exclusive_gpu

    if rounds < 3 or warmup_rounds < 0:
        raise ValueError(
            f"`rounds` must be >= 3 and `warmup_rounds` >= 0, got rounds={rounds}, "
            f"warmup_rounds={warmup_rounds}"
        )
    settings = settings or ValidationConfig(mode=desc.mode)
    protocol = protocol.for_description(desc)
    measured: dict[str, VariantMeasurement] = {}
    launchers: dict[str, Launch] = {}
    skipped: dict[str, str] = {}
    for name, config in variants.items():
        try:
            launch = make_launch(desc, config, device=device)
            rel_err = check(desc, launch, returns_output=config is None, device=device)
        except Exception as exc:  # one broken variant must not cost the others' numbers
            skipped[name] = f"{type(exc).__name__}: {str(exc)[:500]}"
            continue
        launchers[name] = launch
        measured[name] = VariantMeasurement(config=config, rel_err=rel_err)
    if reference not in launchers:
        raise RuntimeError(f"the reference variant {reference!r} could not be checked: {skipped}")
    arrays = arrays_for(desc.kind)
    sets = timing_sets(desc, device=device, protocol=protocol, arrays=arrays)
    names = list(launchers)
    hold = (
        exclusive_gpu(arrays.current_device(), arrays=arrays)
        if device == "cuda"
        else contextlib.nullcontext()
    )
    with hold:
        for r in range(warmup_rounds + rounds):
            # Rotating the order spreads any position effect over every variant.
            for name in names[r % len(names) :] + names[: r % len(names)]:
                launch = launchers[name]

                def run(i: int, launch: Launch = launch) -> None:
                    launch(sets[i])

                if round_timer is not None:
                    value = round_timer(run, len(sets), arrays=arrays)
                    clock, temp = None, None
                else:
                    stats = measure_round(
                        run, len(sets), device=device, protocol=protocol, arrays=arrays
                    )
                    value, clock, temp = stats.median_ms, stats.sm_clock_mhz, stats.temperature_c
                if r >= warmup_rounds:
                    measured[name].samples_ms.append(float(value))
                    measured[name].sm_clock_mhz.append(clock)
                    measured[name].temperature_c.append(temp)
    others = [n for n in names if n != reference]
    corrected = settings.corrected(max(len(others), 1))
    comparisons = {
        f"{reference}_vs_{name}": compare_samples(
            measured[name].samples_ms,
            measured[reference].samples_ms,
            config=corrected,
            measurement="interleaved",
        ).to_dict()
        for name in others
    }
    return {
        "variants": {
            name: {
                "config": m.config,
                "rel_err": m.rel_err,
                **m.summary(corrected),
                "samples_ms": m.samples_ms,
                "sm_clock_mhz_per_round": m.sm_clock_mhz,
                "temperature_c_per_round": m.temperature_c,
            }
            for name, m in measured.items()
        },
        "comparisons": comparisons,
        "skipped": skipped,
        "reference": reference,
        "rounds": rounds,
        "warmup_rounds": warmup_rounds,
        "timer": ("cuda_events" if device == "cuda" else "host")
        if round_timer is None
        else getattr(round_timer, "__name__", "custom"),
        "protocol": vars(protocol) if round_timer is None else None,
    }


class ConfigRounds:
    """One configuration's rounds of the measurement protocol in this process, for the
    sequential comparisons of `ciq_tune.validation` (``timer() -> ms``).

    A re-measurement through the isolated worker pays for a request, a compile-cache load, new
    inputs and a check in every round, several times the round itself for a micro-second
    kernel. Here the configuration is built and checked once (`make_launch`, `check`), and each
    call is one `measure_round` under `protocol` on the shape's rotating input sets
    (`timing_sets`, shared by every timer of `sets`), holding the GPU's lock so that nothing
    else runs on it meanwhile: the same draw as a trial's value in the search.

    Args:
        desc: The description at one shape.
        config: The configuration (``{"params": ..., "controls": ...}``).
        sets: The shape's timing input sets (`timing_sets`), shared by the timers compared.
        device: ``"cuda"``, or ``"cpu"`` under ``TRITON_INTERPRET=1`` (host clock).
        protocol: The round's settings (the search's).

    Raises:
        MeasurementError: the configuration does not build or is wrong on fresh inputs.
    """

    def __init__(
        self,
        desc: KernelDescription,
        config: Any,
        sets: list[Any],
        *,
        device: str,
        protocol: MeasurementProtocol = DEFAULT_PROTOCOL,
    ) -> None:
        try:
            self._launch = make_launch(desc, config, device=device)
            check(desc, self._launch, returns_output=False, device=device)
        except Exception as exc:  # reported as a failed re-measurement of this candidate
            raise MeasurementError(
                f"{desc.name}: {config} does not build or check: {type(exc).__name__}: {exc}"
            ) from exc
        self._sets = sets
        self._device = device
        self._protocol = protocol.for_description(desc)
        self._arrays = arrays_for(desc.kind)

    def __call__(self) -> float:
        from objectives._gpu import exclusive_gpu

        def run(i: int) -> None:
            self._launch(self._sets[i])

        if self._device != "cuda":
            stats = measure_round(
                run, len(self._sets), device=self._device, protocol=self._protocol
            )
            return stats.median_ms
        with exclusive_gpu(self._arrays.current_device(), arrays=self._arrays) as lease:
            stats = measure_round(
                run,
                len(self._sets),
                device=self._device,
                protocol=self._protocol,
                arrays=self._arrays,
                idle_ms=lease.idle_ms,
            )
        return stats.median_ms
