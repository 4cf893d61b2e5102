"""PTX objective: assemble a PTX file with candidate ptxas controls (CPU only) and report its
registers, spills, stack frame, SASS size and compile time."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ciq_tune.controls import Catalog
from ciq_tune.controls import detect_ptxas
from ciq_tune.errors import BenchmarkTimeout
from ciq_tune.errors import CompileError
from ciq_tune.errors import InvalidControl
from objectives._compile import CompileCache
from objectives._compile import cache_key
from objectives._compile import count_sass_instructions
from objectives._compile import parse_ptxas_verbose
from objectives._compile import run_compiler
from objectives.description import KIND_METRICS
from objectives.description import KernelDescription

METRICS = KIND_METRICS["ptx"]
# Characters of a failed compile's log kept in the reported result (the end holds the error).
_LOG_TAIL = 2000


def ptxas_controls(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ptxas control set inside a configuration of `make_search_space`."""
    return dict(config.get("controls", {}).get("ptxas", {}))


def ptxas_argv(desc: KernelDescription, catalog: Catalog, controls: Mapping[str, Any]) -> list[str]:
    """The full ptxas command line for `controls` (validated), without the output file."""
    argv = [catalog.executable, "-v", f"--gpu-name={desc.arch}", *catalog.render(controls)]
    if desc.entry is not None:
        argv.append(f"--entry={desc.entry}")
    return [*argv, str(desc.source)]


def _failure(status: str, message: str) -> dict[str, Any]:
    # NaN, not an exception: a failed candidate is data for the searcher.
    return {**dict.fromkeys(METRICS, math.nan), "status": status, "error": message[-_LOG_TAIL:]}


def evaluate(
    desc: KernelDescription,
    config: Mapping[str, Any],
    *,
    catalog: Catalog | None = None,
    cache: CompileCache | None = None,
) -> dict[str, Any]:
    """Compile the description's PTX with the configuration's ptxas controls.

    Never raises for a bad candidate: the result's ``status`` is ``ok``, ``invalid_control``,
    ``compile_error`` or ``timeout``, and the metrics are NaN unless it is ``ok``.

    Args:
        desc: a ``kind: ptx`` description.
        config: ``{"controls": {"ptxas": {...}}}`` as produced by `make_search_space`.
        catalog: the ptxas catalog (default: the installed ptxas).
        cache: compile cache (default: none).

    Returns:
        The metrics of `METRICS` plus ``status``, ``argv``, ``cached`` and, when it compiled or
        hit the cache, ``compile_s``: seconds this call spent in ptxas (0 on a cache hit, as
        the other objectives report it for the throughput summary), whereas the metric
        ``compile_time_s`` is the compile's own time, also when it comes from the cache.
    """
    catalog = catalog or detect_ptxas(vendor_controls_files=desc.vendor_controls_files("ptxas"))
    controls = ptxas_controls(config)
    try:
        argv = ptxas_argv(desc, catalog, controls)
    except InvalidControl as exc:
        return _failure("invalid_control", str(exc))
    key = cache_key(desc.source_sha256(), argv[1:-1], catalog.describe())
    if cache is not None and (hit := cache.get(key)) is not None:
        return {**hit, "compile_s": 0.0, "cached": True}
    with tempfile.TemporaryDirectory(prefix="ciq-ptx-") as tmp:
        cubin = Path(tmp) / "out.cubin"
        try:
            run = run_compiler(
                [*argv[:-1], f"--output-file={cubin}", argv[-1]],
                timeout_s=desc.timeouts.compile_s,
            )
        except BenchmarkTimeout as exc:
            return _failure("timeout", str(exc))
        except CompileError as exc:
            return _failure("compile_error", str(exc))
        if run.returncode != 0:
            return _failure("compile_error", run.log)
        stats = parse_ptxas_verbose(run.log)
        if desc.entry is not None:
            stats = {k: v for k, v in stats.items() if k == desc.entry}
        if not stats:
            return _failure(
                "compile_error", f"no function statistics in ptxas -v output:\n{run.log}"
            )
        sass = count_sass_instructions(cubin, arch=desc.arch)
    result: dict[str, Any] = {
        "spill_bytes": sum(s.spill_bytes for s in stats.values()),
        "spill_stores": sum(s.spill_stores for s in stats.values()),
        "spill_loads": sum(s.spill_loads for s in stats.values()),
        "registers": max(s.registers for s in stats.values()),
        "stack_bytes": max(s.stack_bytes for s in stats.values()),
        "sass_instructions": math.nan if sass is None else sass,
        "compile_time_s": run.elapsed_s,
        "status": "ok",
        "argv": " ".join(argv[1:-1]),
    }
    if cache is not None:
        cache.put(key, result)
    return {**result, "compile_s": run.elapsed_s, "cached": False}


def make_trainable(
    desc: KernelDescription, *, cache_dir: str | Path | None = None
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A Ray Tune function trainable that compiles one candidate and reports its metrics.

    Args:
        desc: a ``kind: ptx`` description.
        cache_dir: compile-cache folder (default: ``$CIQ_TUNE_CACHE`` or ~/.cache/ciq-tune).
    """
    if desc.kind != "ptx":
        raise ValueError(f"`desc` must be a kind='ptx' description, got kind={desc.kind!r}")
    cache_root = None if cache_dir is None else str(cache_dir)

    def ptx_trainable(config: dict[str, Any]) -> dict[str, Any]:
        # Returned, not passed to tune.report: Tune records it as the trial's final result, and
        # callers outside Tune get it too.
        return evaluate(desc, config, cache=CompileCache(cache_root))

    return ptx_trainable
