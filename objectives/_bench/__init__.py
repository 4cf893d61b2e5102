"""Benchmark harness of a trial: inputs (`inputs`), the correctness check (`checking`), the
configuration split (`configs`) and the check-then-time sequence (`harness`); the timing itself
is the measurement protocol of `objectives.protocol`."""

from __future__ import annotations

from objectives._bench.checking import CheckResult
from objectives._bench.checking import compare
from objectives._bench.configs import split_config
from objectives._bench.harness import check_and_time
from objectives._bench.inputs import TIMING_SEED
from objectives._bench.inputs import make_inputs
from objectives._bench.inputs import reference_outputs
from objectives._bench.inputs import timing_sets

__all__ = [
    "TIMING_SEED",
    "CheckResult",
    "check_and_time",
    "compare",
    "make_inputs",
    "reference_outputs",
    "split_config",
    "timing_sets",
]
