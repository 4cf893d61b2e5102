"""Re-measurement rounds served by the benchmark worker that timed the search.

A validation round of a configuration is a request to a GPU's benchmark worker
(`objectives.gpu_workers.GpuWorkers`, or a Ray cluster's `searchers.benchmark_pool`): the
worker builds and checks the configuration once (`objectives.remeasure.ConfigRounds`, kept
between requests) and times one round of `SERVER_PROTOCOL` per request, on the same timing
input sets and with the same protocol as the search's candidates. So a configuration's
re-measured value is a draw of the quantity the search recorded, and a round costs the round
itself plus a pipe round trip, not a worker start, a compile-cache load and a check.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ciq_tune.errors import MeasurementError
from objectives._arrays import arrays_for
from objectives._bench import timing_sets
from objectives._stages import Benchmarker
from objectives._stages import BenchmarkRequest
from objectives._stages import metric_value
from objectives.description import KernelDescription
from objectives.protocol import BACK_TO_BACK_PROTOCOL
from objectives.remeasure import ConfigRounds

TARGET = "objectives.served_rounds:time_round"
SERVER_PROTOCOL = BACK_TO_BACK_PROTOCOL
"""The protocol of a benchmark worker's rounds: the search's candidates and the re-measurement
alike."""
SERVED_WARMUP_ROUNDS = 1
"""Untimed rounds of each side before a served comparison: the first builds and checks the
configuration in the worker; the GPU is at its loaded clock already, having timed the search."""
# Configurations a worker keeps built between requests (a validation compares a few at a time).
_KEPT = 32
_ROUNDS: OrderedDict[str, ConfigRounds] = OrderedDict()


def time_round(payload: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The worker's task: one round of ``payload["config"]`` at ``payload["description"]``'s
    shape; ``time_ms`` is its value. A configuration that does not build or check is an
    ``error`` with the reason."""
    data, config = payload["description"], payload["config"]
    key = json.dumps([data, config], sort_keys=True)
    rounds = _ROUNDS.get(key)
    if rounds is None:
        desc = KernelDescription.model_validate(data)
        device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
        arrays = arrays_for(desc.kind)
        try:
            sets = timing_sets(desc, device=device, protocol=SERVER_PROTOCOL, arrays=arrays)
            rounds = ConfigRounds(desc, config, sets, device=device, protocol=SERVER_PROTOCOL)
        except MeasurementError as exc:
            return {"status": "error", "error": str(exc)}
        _ROUNDS[key] = rounds
        while len(_ROUNDS) > _KEPT:
            _ROUNDS.popitem(last=False)
    _ROUNDS.move_to_end(key)
    progress("compiled")
    return {"status": "ok", "time_ms": rounds()}


def served_measure(
    desc: KernelDescription, benchmark: Benchmarker, *, preload: tuple[str, ...] = ()
) -> Callable[[Any], float]:
    """``measure(config) -> ms``: one round of `config` at `desc`'s shape on `benchmark`'s
    worker (`ciq_tune.validation`'s measure).

    Raises:
        MeasurementError: (from the returned function) the round failed.
    """
    data = desc.model_dump(mode="json")

    def measure(config: Any) -> float:
        request = BenchmarkRequest(
            target=TARGET,
            payload={"description": data, "config": config},
            compile_timeout_s=desc.timeouts.compile_s,
            run_timeout_s=desc.timeouts.run_s,
            preload=preload,
        )
        return metric_value(desc.name, "time_ms", benchmark(request), config)

    return measure
