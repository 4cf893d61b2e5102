"""Trainables built from kernel description files, and their search spaces."""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from typing import Any

from ciq_tune.controls import detect_catalog
from ciq_tune.errors import ConstraintError
from ciq_tune.errors import DescriptionError
from ciq_tune.errors import SpaceError
from ciq_tune.space import SearchSpace
from objectives._stages import Benchmarker
from objectives._stages import metric_value
from objectives.description import ENERGY_METRICS
from objectives.description import KernelDescription
from objectives.description import load_description

__all__ = [
    "STAGED_KINDS",
    "KernelDescription",
    "benchmark_worker_setup",
    "compile_slots",
    "load_description",
    "make_measure",
    "make_search_space",
    "make_trainable",
    "measurement_is_exact",
    "prestart_workers",
    "starting_points",
]


# Kinds whose evaluation splits into a compile stage and a benchmark stage (`objectives._stages`).
STAGED_KINDS = ("triton",)


def make_trainable(
    description: KernelDescription,
    *,
    energy: bool | None = None,
    benchmark: Benchmarker | None = None,
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The trainable of a description, from ``objectives.<kind>.make_trainable``.

    The module is imported only here, so that a PTX search never imports torch or Triton.
    `searchers.kernel_search.kernel_trainable` adds the per-trial log lines of a Tune run.

    Args:
        description: The kernel description.
        energy: Also measure NVML energy per call (``energy_mj``) and mean power
            (``power_w``) on a GPU; None: when the description's metric is one of them. Pass
            True to search them as extra objectives of a multi-objective search.
        benchmark: For a kind of `STAGED_KINDS`, where candidates are checked and timed
            (`objectives._stages`); the trial then only compiles.

    Raises:
        ValueError: `benchmark` is given for a kind that is not staged.
    """
    module = importlib.import_module(f"objectives.{description.kind}")
    if energy is None:
        energy = description.metric in ENERGY_METRICS
    trainable: Callable[[dict[str, Any]], dict[str, Any]]
    if benchmark is not None:
        if description.kind not in STAGED_KINDS:
            raise ValueError(
                f"`benchmark` needs a kind of {STAGED_KINDS}, got kind={description.kind!r}"
            )
        trainable = module.make_trainable(description, energy=energy, benchmark=benchmark)
    elif description.kind == "ptx":
        trainable = module.make_trainable(description)  # compile-only: nothing to power
    else:
        trainable = module.make_trainable(description, energy=energy)
    return trainable


def benchmark_worker_setup(kind: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The modules a benchmark worker of a staged `kind` preloads, and its environment where
    it has no GPU (see `objectives._stages.BenchmarkRequest`).

    Raises:
        ValueError: `kind` is not in `STAGED_KINDS`.
    """
    if kind not in STAGED_KINDS:
        raise ValueError(f"`kind` must be one of {STAGED_KINDS}, got kind={kind!r}")
    worker = importlib.import_module(f"objectives.{kind}").WORKER
    return tuple(worker.preload), dict(worker.cpu_env)


def compile_slots(num_cpus: int | None = None) -> int:
    """Candidates a local search evaluates at a time: `num_cpus` when given, else every CPU of
    this machine but the one its GPU's benchmark worker and the search itself share (>= 1)."""
    if num_cpus is not None:
        return max(1, num_cpus)
    return max(1, (os.cpu_count() or 2) - 1)


def prestart_workers(kind: str, n: int, *, staged: bool = False) -> None:
    """Start `n` of this process's isolated workers for candidates of `kind` now, in the
    background (their imports take seconds), so that a search's first compiles find them
    warm; nothing for a kind that compiles in no worker (PTX). `staged`: the workers only
    compile, for a GPU's benchmark workers to time (`objectives._stages.compile_env`)."""
    from objectives._isolate import prestart
    from objectives._stages import compile_env
    from objectives._stages import worker_env

    worker = getattr(importlib.import_module(f"objectives.{kind}"), "WORKER", None)
    if worker is not None:
        env = compile_env(worker.cpu_env) if staged else worker_env(worker.cpu_env)
        prestart(n, env=env, preload=worker.preload)


def make_measure(description: KernelDescription) -> Callable[[Any], float]:
    """One fresh measurement of a configuration's metric, for `ciq_tune.validation`.

    Each call runs the same evaluation as a trial (compile, check, benchmark; in the isolated
    worker for GPU kinds) and returns ``result[description.metric]``. A PTX candidate is
    compiled afresh, without the compile cache, so ``compile_time_s`` is re-measured.

    Raises:
        MeasurementError: (from the returned function) the run's status is not ``ok`` or its
            metric is not a finite number.
    """
    evaluate: Callable[[Any], dict[str, Any]]
    if description.kind == "ptx":
        from objectives.ptx import evaluate as evaluate_ptx

        evaluate = functools.partial(evaluate_ptx, description)
    else:
        # The timed kinds' trainables return their result dict and work outside Ray too.
        evaluate = make_trainable(description)

    def measure(config: Any) -> float:
        return metric_value(description.name, description.metric, evaluate(config), config)

    return measure


def measurement_is_exact(description: KernelDescription) -> bool:
    """Whether a fresh evaluation reproduces the metric exactly, so re-measuring tests nothing:
    the compile statistics of a PTX kernel (ptxas output is determined by the PTX, the options
    and the ptxas version, all recorded), unlike its compile time or any runtime."""
    return description.kind == "ptx" and description.metric != "compile_time_s"


def make_search_space(description: KernelDescription) -> SearchSpace:
    """Kernel parameters and compiler controls of a description as one `SearchSpace`.

    Configurations look like ``{"params": {"BLOCK_M": 64}, "controls": {"ptxas": {...}}}``;
    a knocked-out control is absent (the compiler's default). A Helion kernel's space is derived
    from its config spec (`objectives.helion.make_search_space`), its default being Helion's
    default Config, which `starting_points` then evaluates first.

    Raises:
        DescriptionError: the description searches nothing (no params, no controls).
    """
    if description.kind == "helion":
        return importlib.import_module("objectives.helion").make_search_space(description)
    spec: dict[str, Any] = {}
    if description.params:
        spec["params"] = description.param_space()
    controls: dict[str, Any] = {}
    for name, selection in description.controls.items():
        catalog = detect_catalog(
            name,
            arch=description.arch,
            vendor_controls_files=description.vendor_controls_files(name),
        )
        part = catalog.space(selection.include, selection.exclude, selection.allow_numerics_changes)
        if part:
            controls[name] = part
    if controls:
        spec["controls"] = controls
    if not spec:
        raise DescriptionError(
            f"{description.path}: nothing to search; add `params` or select `controls`"
        )
    try:
        return SearchSpace(spec, constraints=description.constraints)
    except ConstraintError as exc:
        raise DescriptionError(f"{description.path}: field `constraints`: {exc}") from None


def _encoded(space: SearchSpace, partial: dict[str, Any]) -> Any | None:
    """`partial` completed with the defaults in `space`, or without its controls when the space
    does not search them; None when neither is in the space or feasible."""
    for candidate in (partial, {k: v for k, v in partial.items() if k != "controls"}):
        try:
            genes = space.encode(candidate, fill_defaults=True)
        except SpaceError:
            continue
        if space.is_feasible(genes):
            return space.decode(genes)
    return None


def starting_points(description: KernelDescription, space: SearchSpace) -> list[Any]:
    """Configurations to evaluate first: the defaults (baseline), the description's
    `starting_points` (known-good settings), a Triton kernel's own `@triton.autotune` list
    (those of its configurations the space holds), then each catalog preset and each vendor
    controls file offered to ptxas, on the defaults.

    Every point is encoded in `space`, so a preset the selection excludes is dropped.

    Raises:
        DescriptionError: a listed starting point is not in the space or breaks a constraint.
    """
    baseline = space.decode(space.default_genes())
    points = [baseline]
    for index, listed in enumerate(description.starting_points):
        try:
            genes = space.encode(listed, fill_defaults=True)
        except SpaceError as exc:
            raise DescriptionError(
                f"{description.path}: `starting_points[{index}]` {listed} is not in the search "
                f"space: {exc}"
            ) from exc
        if not space.is_feasible(genes):
            raise DescriptionError(
                f"{description.path}: `starting_points[{index}]` {listed} breaks a constraint "
                f"of {[c.rule for c in space.constraints]}"
            )
        point = space.decode(genes)
        if point not in points:
            points.append(point)
    if description.kind == "triton":
        # The kernel's own @triton.autotune list, as far as this space holds it.
        shipped = importlib.import_module("objectives.triton").autotune_points(description)
        for listed in shipped:
            point = _encoded(space, listed)
            if point is not None and point not in points:
                points.append(point)
    for name, selection in description.controls.items():
        catalog = detect_catalog(
            name,
            arch=description.arch,
            vendor_controls_files=description.vendor_controls_files(name),
        )
        presets = catalog.presets(
            selection.include, selection.exclude, selection.allow_numerics_changes
        )
        # A user's own vendor controls file, offered opaquely, is tried on the defaults first.
        vendor = [{"apply_controls": f} for f in description.vendor_controls_files(name)]
        for preset in [*presets.values(), *vendor]:
            point = {**baseline, "controls": {**baseline.get("controls", {}), name: preset}}
            point = space.decode(space.encode(point, fill_defaults=True))
            if point not in points:
                points.append(point)
    return points
