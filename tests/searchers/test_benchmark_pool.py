"""The per-GPU benchmark servers on a CPU (one server, no GPU)."""

from __future__ import annotations

import time

import pytest

from objectives._stages import BenchmarkRequest
from searchers.benchmark_pool import BenchmarkPool
from tests.searchers.slow_import import SECONDS

SLOW = ("tests.searchers.slow_import",)


@pytest.mark.slow
def test_servers_warm_up_beside_the_first_requests(ray_cluster: None) -> None:
    # The servers' workers import a module that takes SECONDS: starting the pool does not
    # wait for that (the search's first trials compile meanwhile); the first request waits
    # behind the warm-up and is then served by a warm worker.
    pool = BenchmarkPool.start(gpus=0, preload=SLOW)
    assert pool.warming()
    t0 = time.perf_counter()
    try:
        request = BenchmarkRequest(
            target="objectives._stages:ready",
            payload={},
            compile_timeout_s=60.0,
            run_timeout_s=60.0,
            preload=SLOW,
        )
        result = pool(request)
        served_s = time.perf_counter() - t0
        assert result["status"] == "ok" and result["bench_spawn_s"] == 0.0  # warm already
        assert served_s >= SECONDS / 2  # queued behind the warm-up
        # The server's other worker may still be finishing its own warm-up: wait for both.
        (warm_s,) = pool.wait_warm()
        assert warm_s >= SECONDS
        assert not pool.warming()
        assert pool.stats()[0]["served"] == 1  # the warm-up is not counted
    finally:
        pool.shutdown()
