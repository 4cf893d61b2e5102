"""A local search's benchmark workers (`objectives.gpu_workers`), the isolated workers' pool
(`objectives._isolate.prestart`) and the GPU lock's idle time, on a CPU."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from objectives._gpu import held_lock
from objectives._isolate import close_idle
from objectives._isolate import prestart
from objectives._isolate import run_isolated
from objectives._stages import BenchmarkRequest
from objectives.gpu_workers import GpuWorkers

T = "tests.objectives.isolate_targets"


def _request(seconds: float) -> BenchmarkRequest:
    return BenchmarkRequest(
        target=f"{T}:sleep_and_echo", payload=seconds, compile_timeout_s=60, run_timeout_s=60
    )


def _at_once(workers: GpuWorkers, requests: int, seconds: float) -> tuple[list[dict], float]:
    """`requests` requests of `seconds` each sent together; their results and the wall time."""
    results: list[dict] = []
    threads = [
        threading.Thread(target=lambda: results.append(workers(_request(seconds))))
        for _ in range(requests)
    ]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, time.perf_counter() - t0


def test_two_workers_per_gpu_serve_two_requests_at_once_each_seeing_its_gpu() -> None:
    workers = GpuWorkers(gpus=["0", "1"], per_gpu=2)
    try:
        workers.wait_warm()
        results, wall = _at_once(workers, 4, 1.0)
    finally:
        workers.close()
    assert all(r["status"] == "ok" for r in results)
    assert len({r["pid"] for r in results}) == 4  # four workers, one request each
    assert sorted(r["gpu"] for r in results) == ["0", "0", "1", "1"]
    assert wall < 2.5  # at once, not one after the other (4 s)
    stats = workers.stats()
    assert [s["served"] for s in stats] == [1, 1, 1, 1]
    assert all(0 < s["ready_s"] < s["alive_s"] for s in stats)  # type: ignore[operator]


def test_a_request_waits_for_a_free_worker() -> None:
    workers = GpuWorkers(gpus=[], per_gpu=2)  # no GPU: one CPU worker
    try:
        results, wall = _at_once(workers, 2, 0.5)
    finally:
        workers.close()
    assert len({r["pid"] for r in results}) == 1 and wall >= 1.0  # one after the other


def test_prestarted_workers_take_the_first_tasks_without_starting_again() -> None:
    env = {"CIQ_TEST_POOL": "prestart"}
    prestart(2, env=env)
    try:
        results: list[dict] = []
        threads = [
            threading.Thread(
                target=lambda: results.append(
                    run_isolated(
                        f"{T}:sleep_and_echo", 0.3, compile_timeout_s=60, run_timeout_s=60, env=env
                    )
                )
            )
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        again = run_isolated(
            f"{T}:sleep_and_echo", 0, compile_timeout_s=60, run_timeout_s=60, env=env
        )
    finally:
        close_idle()
    assert len({r["pid"] for r in results}) == 2  # each took a worker of its own
    # each waited for its worker's start under way (its spawn time), none started another
    assert all(r["worker_spawn_s"] < r["wall_s"] for r in results)
    assert again["pid"] in {r["pid"] for r in results} and again["worker_spawn_s"] == 0.0


def test_the_gpu_lock_says_how_long_the_gpu_idled(tmp_path: Path) -> None:
    path = tmp_path / "gpu.lock"
    with held_lock(path) as first:
        pass
    assert first.idle_ms is None  # never released before
    time.sleep(0.2)
    with held_lock(path) as second:
        pass
    assert second.idle_ms is not None and 150 <= second.idle_ms < 5000


def test_a_benchmark_worker_serves_more_tasks_than_a_compile_worker_keeps_without_restarting() -> (
    None
):
    from objectives._isolate import DEFAULT_MAX_TASKS

    # a validation sends a benchmark worker hundreds of rounds; a restart costs seconds
    workers = GpuWorkers(gpus=[], per_gpu=1)
    request = BenchmarkRequest(
        target=f"{T}:echo", payload=1, compile_timeout_s=60, run_timeout_s=60
    )
    try:
        pids = {workers(request)["pid"] for _ in range(DEFAULT_MAX_TASKS + 1)}
    finally:
        workers.close()
    assert len(pids) == 1


def test_a_benchmark_worker_warms_its_gpu_as_it_starts_and_a_cpu_one_starts_all_the_same() -> None:
    import sys

    from objectives._stages import GPU_WARM

    workers = GpuWorkers(gpus=[], per_gpu=1)
    request = BenchmarkRequest(
        target=f"{T}:modules", payload=GPU_WARM, compile_timeout_s=60, run_timeout_s=60
    )
    try:
        result = workers(request)
    finally:
        workers.close()
    assert result["status"] == "ok" and result["loaded"]
    assert GPU_WARM not in sys.modules  # only the worker imported it
