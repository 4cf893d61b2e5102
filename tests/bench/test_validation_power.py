"""Error rates of the validation statistics replayed on recorded pairs of identical rounds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.validation_power import replay_rates


def _record(path: Path, rng: np.random.Generator, rounds: int = 60) -> Path:
    # Shared drift (clock, temperature) plus 0.5 % independent noise per round.
    drift = 0.2 * (1 + 0.05 * np.sin(np.linspace(0, 3, rounds)))
    a = drift * (1 + 0.005 * rng.normal(size=rounds))
    b = drift * (1 + 0.005 * rng.normal(size=rounds))
    variants = {"default": {"samples_ms": a.tolist()}, "default_again": {"samples_ms": b.tolist()}}
    path.write_text(json.dumps({"remeasure": {"variants": variants}}))
    return path


def test_replayed_identical_pairs_are_kept_rarely_and_a_real_3pct_almost_always(tmp_path):
    rng = np.random.default_rng(0)
    paths = [_record(tmp_path / f"k{i}.json", rng) for i in range(2)]
    (row,) = replay_rates(paths, trials=200, repetitions=[30])
    assert row["kernels"] == 2
    assert row["false_accept"]["rate"] <= 0.08
    assert row["false_reject"]["rate"] <= 0.05
    assert all(0.003 < sd < 0.01 for sd in row["pair_log_ratio_sd"])
