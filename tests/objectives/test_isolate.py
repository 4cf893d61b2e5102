"""Tests of the isolated worker: timeouts, crashes and warm reuse."""

from __future__ import annotations

import os
import time

import pytest

from objectives._isolate import IsolatedWorker
from objectives._isolate import run_isolated

T = "tests.objectives.isolate_targets"


@pytest.fixture
def worker():
    w = IsolatedWorker()
    yield w
    w.close()


def test_ok_result_and_warm_reuse(worker):
    first = worker.run(f"{T}:echo", {"x": 1}, compile_timeout_s=30, run_timeout_s=30)
    second = worker.run(f"{T}:echo", [2], compile_timeout_s=30, run_timeout_s=30)
    assert first["status"] == "ok" and first["payload"] == {"x": 1}
    assert second["payload"] == [2]
    assert first["pid"] == second["pid"] != os.getpid()
    assert first["worker_spawn_s"] > 0 and second["worker_spawn_s"] == 0
    assert worker.spawns == 1


def test_wrong_result_keeps_worker(worker):
    a = worker.run(f"{T}:wrong", None, compile_timeout_s=30, run_timeout_s=30)
    b = worker.run(f"{T}:echo", None, compile_timeout_s=30, run_timeout_s=30)
    assert a["status"] == "wrong_result" and a["error"] == "3 elements differ"
    assert a["pid"] == b["pid"]


def test_compile_hang_is_killed_and_worker_replaced(worker):
    worker.run(f"{T}:echo", None, compile_timeout_s=30, run_timeout_s=30)
    old_pid = worker.pid
    t0 = time.monotonic()
    res = worker.run(f"{T}:hang_compile", 60.0, compile_timeout_s=1.0, run_timeout_s=30)
    assert time.monotonic() - t0 < 10
    assert res["status"] == "timeout" and "compile" in res["error"]
    assert worker.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid, 0)
    after = worker.run(f"{T}:echo", None, compile_timeout_s=30, run_timeout_s=30)
    assert after["status"] == "ok" and after["pid"] != old_pid


def test_run_hang_uses_run_timeout(worker):
    res = worker.run(f"{T}:hang_run", 60.0, compile_timeout_s=30, run_timeout_s=1.0)
    assert res["status"] == "timeout" and res["error"].startswith("run exceeded")


def test_segfault_is_a_crash_with_signal(worker):
    res = worker.run(f"{T}:segfault", None, compile_timeout_s=30, run_timeout_s=30)
    assert res["status"] == "crash" and "SIGSEGV" in res["error"]
    assert worker.run(f"{T}:echo", 1, compile_timeout_s=30, run_timeout_s=30)["status"] == "ok"
    assert worker.spawns == 2


def test_exception_is_a_crash_and_retires_worker(worker):
    worker.run(f"{T}:echo", None, compile_timeout_s=30, run_timeout_s=30)
    old_pid = worker.pid
    res = worker.run(f"{T}:raise_error", None, compile_timeout_s=30, run_timeout_s=30)
    assert res["status"] == "crash" and "illegal memory access" in res["error"]
    assert "restart" not in res
    assert worker.run(f"{T}:echo", None, compile_timeout_s=30, run_timeout_s=30)["pid"] != old_pid


def test_non_dict_result_is_a_crash(worker):
    res = worker.run(f"{T}:bad_result", None, compile_timeout_s=30, run_timeout_s=30)
    assert res["status"] == "crash" and "42" in res["error"]


@pytest.mark.parametrize("bad", [0, -1.0])
def test_timeouts_must_be_positive(worker, bad):
    with pytest.raises(ValueError, match="compile_timeout_s"):
        worker.run(f"{T}:echo", None, compile_timeout_s=bad, run_timeout_s=1)


def test_run_isolated_keys_workers_by_env():
    a = run_isolated(f"{T}:echo", 0, compile_timeout_s=30, run_timeout_s=30, env={"K": "1"})
    b = run_isolated(f"{T}:echo", 0, compile_timeout_s=30, run_timeout_s=30, env={"K": "1"})
    c = run_isolated(f"{T}:echo", 0, compile_timeout_s=30, run_timeout_s=30, env={"K": "2"})
    assert a["pid"] == b["pid"] != c["pid"]


def test_failed_start_is_a_crash_result():
    worker = IsolatedWorker(preload=("no_such_module_ciq",))
    res = worker.run(f"{T}:echo", 0, compile_timeout_s=30, run_timeout_s=30)
    assert res["status"] == "crash" and "while starting" in res["error"]
    assert worker.pid is None


def test_preload_counts_in_spawn_time():
    worker = IsolatedWorker(preload=("torch",))
    try:
        res = worker.run(f"{T}:echo", 0, compile_timeout_s=30, run_timeout_s=30)
        # importing torch takes well over 0.3 s on any machine; a bare interpreter far less
        assert res["status"] == "ok" and res["worker_spawn_s"] > 0.3
    finally:
        worker.close()


def test_a_task_that_waits_for_its_workers_start_counts_the_wait_as_spawn_time():
    import threading

    worker = IsolatedWorker(preload=("torch",))
    holding = threading.Event()
    start = threading.Thread(target=worker.warm_up, args=(holding,))
    try:
        start.start()
        holding.wait()  # the start is under way: the task waits for its imports
        res = worker.run(f"{T}:echo", 0, compile_timeout_s=30, run_timeout_s=30)
        assert res["status"] == "ok" and res["worker_spawn_s"] > 0.3
        assert res["wall_s"] >= res["worker_spawn_s"]
    finally:
        start.join()
        worker.close()


def test_a_leaking_worker_is_recycled_above_its_memory_limit() -> None:
    worker = IsolatedWorker(max_rss_mb=150.0, max_tasks=None)
    try:
        pids, rss = [], []
        for _ in range(6):
            res = worker.run(f"{T}:leak", 40, compile_timeout_s=30, run_timeout_s=30)
            assert res["status"] == "ok"
            pids.append(res["pid"])
            rss.append(res["rss_mb"])
        # Each task keeps 40 MB more; the worker is replaced once it passes 150 MiB, so its
        # memory never grows past the limit plus one task's leak.
        assert worker.recycled >= 1 and len(set(pids)) >= 2
        assert max(rss) < 150 + 40 + 10
    finally:
        worker.close()


def test_a_worker_is_recycled_after_max_tasks() -> None:
    worker = IsolatedWorker(max_tasks=2, max_rss_mb=None)
    try:
        pids = [
            worker.run(f"{T}:echo", i, compile_timeout_s=30, run_timeout_s=30)["pid"]
            for i in range(5)
        ]
        assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
        assert worker.spawns == 3 and worker.recycled == 2
    finally:
        worker.close()


def test_recycling_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_tasks"):
        IsolatedWorker(max_tasks=0)
    with pytest.raises(ValueError, match="max_rss_mb"):
        IsolatedWorker(max_rss_mb=float("nan"))


def test_a_worker_starts_and_ends_without_a_warning() -> None:
    # Run as `python -m objectives._isolate`, the worker made runpy warn on its stderr that the
    # module was imported before it ran; `-W error` turns any warning into a failure.
    import os
    import subprocess
    import sys

    from objectives import _isolate

    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(_isolate._PROJECT_ROOT)}
    command = [sys.executable, "-W", "error", "-c", _isolate.WORKER_CODE]
    proc = subprocess.Popen(
        [*command, str(to_child_r), str(from_child_w)],
        env=env,
        pass_fds=(to_child_r, from_child_w),
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(to_child_r)
    os.close(from_child_w)
    os.close(to_child_w)  # no task: the worker reports ready, reads EOF and ends
    _, stderr = proc.communicate(timeout=60)
    os.close(from_child_r)
    assert proc.returncode == 0 and stderr == "", stderr


def test_a_profiled_worker_writes_where_its_tasks_spent_their_time(tmp_path) -> None:
    import pstats

    from objectives._isolate import PROFILE_ENV

    folder = tmp_path / "not-yet-made"
    profiled = IsolatedWorker(env={PROFILE_ENV: str(folder)})
    try:
        result = profiled.run(f"{T}:echo", {"x": 1}, compile_timeout_s=30, run_timeout_s=30)
    finally:
        profiled.close()
    stats = pstats.Stats(str(folder / f"{result['pid']}.prof"))
    assert any(name == "echo" for _, _, name in stats.stats)  # type: ignore[attr-defined]


def test_a_compile_worker_yields_its_cpu_to_the_search_and_the_gpu_workers() -> None:
    from objectives._stages import COMPILE_NICE
    from objectives._stages import compile_env

    mine = os.nice(0)
    compiling = IsolatedWorker(env=compile_env({}))
    plain = IsolatedWorker()
    try:
        niced = compiling.run(f"{T}:niceness", None, compile_timeout_s=30, run_timeout_s=30)
        same = plain.run(f"{T}:niceness", None, compile_timeout_s=30, run_timeout_s=30)
    finally:
        compiling.close()
        plain.close()
    assert niced["nice"] == min(mine + COMPILE_NICE, 19) and same["nice"] == mine
