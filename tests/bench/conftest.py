"""Shared fixtures: a small recorded space from ../shared/benchdata (skipped when absent)."""

from __future__ import annotations

import pytest

from bench.replay import DEFAULT_DATA
from bench.replay import Problem
from bench.replay import load_problem

# 1724 feasible configurations, 228 of them failed: small enough for fast tests.
SMALL = "kernel_tuner_paper_2018/convolution_brute_force.json.gz"


@pytest.fixture(scope="session")
def small() -> Problem:
    if not (DEFAULT_DATA / "load.py").is_file():
        pytest.skip(f"the recorded benchmark data is not at {DEFAULT_DATA}")
    return load_problem(DEFAULT_DATA, SMALL)
