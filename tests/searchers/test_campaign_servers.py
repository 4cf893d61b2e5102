"""A campaign spread over two benchmark servers: two CPU servers stand in for the two GPUs of a
node (Triton's interpreter times the candidates), and the campaign's searches keep both busy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from objectives import benchmark_worker_setup
from searchers.benchmark_pool import BenchmarkPool
from searchers.campaign import run_campaign
from searchers.campaign_specs import CampaignConfig
from searchers.campaign_specs import SearchSpec
from tests.searchers.test_campaign import scale_description

SEARCHES = 3
BUDGET = 3
BUSY_SHARE = 0.25
"""The least share of the campaign's evaluations window (first result to last) each server
spends serving requests: 0.51–0.77 in five runs on the 2-core CPU VM."""


def _scale(folder: Path) -> Path:
    """y = 2·x at n = 8192 in blocks of 64: 128 interpreted programs per launch, so a
    candidate's check and timing (a few tenths of a second) outweigh its compile, as a GPU's
    timing of a matrix does. The search varies `num_warps`, which the interpreter ignores:
    every candidate costs its server the same."""
    return scale_description(
        folder,
        n=8192,
        params={"BLOCK": {"ordinal": [64]}},
        controls={"triton": {"include": ["num_warps"]}},
    )


@pytest.mark.slow
def test_a_campaign_keeps_two_benchmark_servers_busy(ray_cluster: None, tmp_path: Path) -> None:
    preload, cpu_env = benchmark_worker_setup("triton")
    # Two servers without a GPU, holding no CPU: the shared Ray's two CPUs compile.
    pool = BenchmarkPool.start(
        gpus=0, cpu_servers=2, server_cpus=0, preload=preload, cpu_env=cpu_env
    )
    description = _scale(tmp_path)
    searches = [
        SearchSpec(description=description, budget=BUDGET, seed=seed, name=f"scale-{seed}")
        for seed in range(SEARCHES)
    ]
    config = CampaignConfig(out=tmp_path / "out", benchmark="per-gpu", tracking="none")
    try:
        rows = run_campaign(searches, config, benchmark=pool)
        stats = pool.stats()
    finally:
        pool.shutdown()
    assert [(r["status"], r["evaluations"], r["ok"]) for r in rows] == [
        ("done", BUDGET, BUDGET)
    ] * SEARCHES, rows
    # Every evaluation was timed on one of the two servers (and the re-measurements of those
    # within noise of their search's best), each server taking a fair part of them.
    served = [s["served"] for s in stats]
    assert sum(served) >= SEARCHES * BUDGET
    assert min(served) >= sum(served) / 4, served
    assert json.loads((tmp_path / "out/benchmark_servers.json").read_text())[0]["served"] > 0
    timing = json.loads((tmp_path / "out/campaign_timing.json").read_text())
    window = timing["last_result_at"] - timing["first_result_at"]
    busy = [s["busy_s"] / window for s in stats]
    assert min(busy) >= BUSY_SHARE, (busy, stats, window)
