"""Run each candidate in a separate worker process, with compile and run timeouts.

A candidate that hangs is killed, one that segfaults or corrupts its CUDA context fails alone
with its reason as data, and the calling process (a Ray worker) carries on. The worker is a
fresh interpreter (``python -c`` calling `main`, never a fork, so no CUDA state is
inherited) and stays warm between candidates that end cleanly; it is replaced after a crash or
a timeout, and recycled after `max_tasks` tasks or once its resident memory passes
`max_rss_mb`, so a task that leaks cannot grow the worker without bound.

A task is a module-level function named ``"package.module:function"`` taking
``(payload, progress)`` and returning a result dict with a ``status`` in `STATUSES`. It calls
``progress("compiled")`` once compilation is over, which switches the deadline from the compile
timeout to the run timeout. A result with ``"restart": True`` retires the worker after it.
`call_pickled` is the task for user code given as a callable (cloudpickled with its arguments).
"""

from __future__ import annotations

import atexit
import contextlib
import cProfile
import importlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

STATUSES = ("ok", "compile_error", "timeout", "wrong_result", "crash", "error")
# Statuses after which the worker's CUDA context is known to be sound, so it may be reused
# ("error": user code raised an exception and the worker caught it).
_KEEP_WARM = frozenset({"ok", "compile_error", "wrong_result", "error"})
# A warm worker is replaced after this many tasks, or once its resident memory passes this
# many MiB (a CUDA context and torch take ~1-2 GiB; a leak of 200 MB per task is caught
# within a few tasks).
DEFAULT_MAX_TASKS = 200
DEFAULT_MAX_RSS_MB = 4096.0
_PROJECT_ROOT = Path(__file__).resolve().parents[1]
# The worker's program. Not `-m objectives._isolate`: the package imports this module first, and
# runpy then warns, on every worker's stderr, about running a module already imported.
WORKER_CODE = "import sys; from objectives._isolate import main; main(sys.argv[1:])"
# Seconds between liveness checks while waiting for a worker's message.
_POLL_S = 0.5


class _StartFailure(Exception):
    """A new worker died or hung before reporting ready (e.g. a preload import failed)."""


def _failure(status: str, error: str) -> dict[str, Any]:
    return {"status": status, "error": error}


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "worker closed its pipe but is still running"
    if returncode < 0:
        try:
            return f"worker killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"worker killed by signal {-returncode}"
    return f"worker exited with code {returncode}"


class IsolatedWorker:
    """One worker process that runs tasks one at a time under timeouts.

    Args:
        env: Extra environment variables for the worker (e.g. ``{"TRITON_INTERPRET": "1"}``).
        preload: Modules the worker imports before it reports ready (``("torch", "triton")``),
            so that `IsolatedWorker.run`'s ``worker_spawn_s`` is the whole cost of a new worker.
        start_timeout_s: Longest wait, in seconds, for a new worker to import and report ready.
        max_tasks: Tasks a worker runs before it is replaced (None: no limit).
        max_rss_mb: Resident memory, in MiB, above which a worker is replaced after its task
            (None: no limit).
    """

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        preload: tuple[str, ...] = (),
        start_timeout_s: float = 120.0,
        max_tasks: int | None = DEFAULT_MAX_TASKS,
        max_rss_mb: float | None = DEFAULT_MAX_RSS_MB,
    ):
        if not start_timeout_s > 0:
            raise ValueError(
                f"`start_timeout_s` must be > 0, got start_timeout_s={start_timeout_s}"
            )
        if max_tasks is not None and max_tasks < 1:
            raise ValueError(f"`max_tasks` must be >= 1 or None, got max_tasks={max_tasks}")
        if max_rss_mb is not None and not max_rss_mb > 0:
            raise ValueError(f"`max_rss_mb` must be > 0 or None, got max_rss_mb={max_rss_mb}")
        self._max_tasks = max_tasks
        self._max_rss_mb = max_rss_mb
        self._tasks = 0
        self._env = dict(env or {})
        self._preload = preload
        self._start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self.spawns = 0
        self.recycled = 0
        # Held while a task runs or the process starts: one at a time.
        self._lock = threading.Lock()
        self._warming = False  # `warm_up` is starting the worker

    @property
    def pid(self) -> int | None:
        """Process id of the live worker, or None."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _spawn(self) -> float:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = {**os.environ, **self._env}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_PROJECT_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        t0 = time.perf_counter()
        # A new session makes the worker a process-group leader, so a timeout kills the compiler
        # subprocesses it started along with it.
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER_CODE,
                str(to_child_r),
                str(from_child_w),
                *self._preload,
            ],
            env=env,
            pass_fds=(to_child_r, from_child_w),
            start_new_session=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(from_child_r, writable=False)
        self.spawns += 1
        self._tasks = 0
        try:
            msg = self._wait(time.monotonic() + self._start_timeout_s)
        except (EOFError, OSError):
            raise _StartFailure(_describe_exit(self._reap()) + " while starting") from None
        if msg is None:
            self.close()
            raise _StartFailure(f"worker not ready within start_timeout_s={self._start_timeout_s}")
        return time.perf_counter() - t0

    def _wait(self, deadline: float) -> tuple[Any, ...] | None:
        """Next message from the worker, None on timeout; raises EOFError if the worker died."""
        assert self._recv is not None and self._proc is not None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if self._recv.poll(min(remaining, _POLL_S)):
                msg: tuple[Any, ...] = self._recv.recv()
                return msg

    def run(
        self,
        target: str,
        payload: Any,
        *,
        compile_timeout_s: float,
        run_timeout_s: float,
    ) -> dict[str, Any]:
        """Run one task in the worker and return its result dict.

        Args:
            target: ``"package.module:function"`` of the task.
            payload: Picklable argument of the task.
            compile_timeout_s: Seconds allowed from submission until the task reports
                ``progress("compiled")``.
            run_timeout_s: Seconds allowed from then until the result.

        Returns:
            The task's result, or ``{"status": "timeout" | "crash", "error": ...}``; always with
            ``worker_spawn_s`` (seconds spent starting a worker for this task, or waiting for
            a start under way (`warm_up`) to end; 0 when warm) and ``wall_s``.
        """
        for name, value in (
            ("compile_timeout_s", compile_timeout_s),
            ("run_timeout_s", run_timeout_s),
        ):
            if not value > 0:
                raise ValueError(f"`{name}` must be > 0, got {name}={value}")
        asked, warming = time.perf_counter(), self._warming
        with self._lock:
            waited = time.perf_counter() - asked if warming else 0.0
            result = self._run_locked(target, payload, compile_timeout_s, run_timeout_s)
        result["worker_spawn_s"] += waited
        result["wall_s"] += waited
        return result

    def _run_locked(
        self, target: str, payload: Any, compile_timeout_s: float, run_timeout_s: float
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            spawn_s = 0.0 if self.pid is not None else self._spawn()
        except _StartFailure as exc:
            return {**_failure("crash", str(exc)), "worker_spawn_s": math.nan, "wall_s": math.nan}
        result = self._run(target, payload, compile_timeout_s, run_timeout_s)
        self._tasks += 1
        restart = result.pop("restart", False)
        if restart or result.get("status") not in _KEEP_WARM:
            self.close()
        else:
            reason = self._recycle_reason()
            if reason is not None:
                self.close()
                self.recycled += 1
                result["worker_recycled"] = reason
        result["worker_spawn_s"] = spawn_s
        result["wall_s"] = time.perf_counter() - t0
        return result

    def warm_up(self, holding: threading.Event | None = None) -> None:
        """Start the worker process now unless it runs (its imports, `preload`); `holding` is
        set once this call holds the worker, so that a task given it meanwhile waits for the
        start. A start that fails is left for the next task to try again and report."""
        with self._lock:
            self._warming = True
            if holding is not None:
                holding.set()
            try:
                if self.pid is None:
                    with contextlib.suppress(_StartFailure):
                        self._spawn()
            finally:
                self._warming = False

    def _run(
        self, target: str, payload: Any, compile_timeout_s: float, run_timeout_s: float
    ) -> dict[str, Any]:
        assert self._send is not None
        try:
            self._send.send(("task", target, payload))
        except (BrokenPipeError, OSError):
            return _failure("crash", _describe_exit(self._reap()))
        phase, limit = "compile", compile_timeout_s
        deadline = time.monotonic() + limit
        while True:
            try:
                msg = self._wait(deadline)
            except (EOFError, OSError):
                return _failure("crash", _describe_exit(self._reap()))
            if msg is None:
                self.close()
                return _failure("timeout", f"{phase} exceeded its timeout of {limit} s; killed")
            if msg[0] == "phase":
                phase, limit = "run", run_timeout_s
                deadline = time.monotonic() + limit
            elif msg[0] == "result":
                result = msg[1]
                if not isinstance(result, dict) or result.get("status") not in STATUSES:
                    return _failure(
                        "crash", f"task {target} returned {result!r}, not a status dict"
                    )
                return dict(result)

    def rss_mb(self) -> float | None:
        """Resident memory of the live worker in MiB (None: no worker, or not measurable)."""
        pid = self.pid
        if pid is None:
            return None
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0  # the line is in KiB
        except OSError:
            pass
        try:
            import psutil

            rss: float = psutil.Process(pid).memory_info().rss / 2**20
        except Exception:  # psutil missing or the process gone: nothing to measure
            return None
        return rss

    def _recycle_reason(self) -> str | None:
        if self._max_tasks is not None and self._tasks >= self._max_tasks:
            return f"ran max_tasks={self._max_tasks} tasks"
        if self._max_rss_mb is not None:
            rss = self.rss_mb()
            if rss is not None and rss > self._max_rss_mb:
                return f"resident memory {rss:.0f} MiB > max_rss_mb={self._max_rss_mb:g}"
        return None

    def _reap(self) -> int | None:
        """Wait briefly for a dead worker's exit code, then clean up."""
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        self.close()
        return code

    def close(self) -> None:
        """Stop the worker (killing it with its process group) and release its pipes."""
        proc = self._kill()
        if proc is not None:
            proc.wait()

    def _kill(self) -> subprocess.Popen[bytes] | None:
        """Release the pipes and kill the worker's process group; the process to reap."""
        proc, self._proc = self._proc, None
        for conn in (self._send, self._recv):
            if conn is not None:
                conn.close()
        self._send = self._recv = None
        if proc is None or proc.poll() is not None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc


def close_workers(workers: Iterable[IsolatedWorker]) -> None:
    """Stop `workers` together: every one killed before any is waited for, so that their
    teardowns (a GPU context's among them) overlap instead of adding up."""
    _reap([w._kill() for w in workers])


def _reap(procs: Iterable[subprocess.Popen[bytes] | None]) -> None:
    for proc in procs:
        if proc is not None:
            proc.wait()


# Idle warm workers by (env, preload, max_tasks, max_rss_mb); a worker runs one task at a time,
# so a caller takes one out of its list for the task and puts it back after.
_Key = tuple[tuple[tuple[str, str], ...], tuple[str, ...], int | None, float | None]
_IDLE: dict[_Key, list[IsolatedWorker]] = {}
_ALL: list[IsolatedWorker] = []
_POOL_LOCK = threading.Lock()


def _pool_key(
    env: Mapping[str, str] | None,
    preload: tuple[str, ...],
    max_tasks: int | None,
    max_rss_mb: float | None,
) -> tuple[_Key, dict[str, str]]:
    full_env = dict(env or {})
    full_env.setdefault("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    if not full_env["CUDA_VISIBLE_DEVICES"]:
        del full_env["CUDA_VISIBLE_DEVICES"]
    return (tuple(sorted(full_env.items())), preload, max_tasks, max_rss_mb), full_env


def _take(key: _Key, env: dict[str, str]) -> IsolatedWorker:
    with _POOL_LOCK:
        idle = _IDLE.setdefault(key, [])
        if idle:
            return idle.pop()
        worker = IsolatedWorker(env=env, preload=key[1], max_tasks=key[2], max_rss_mb=key[3])
        _ALL.append(worker)
        return worker


def _put_back(key: _Key, worker: IsolatedWorker) -> None:
    with _POOL_LOCK:
        _IDLE[key].append(worker)


def run_isolated(
    target: str,
    payload: Any,
    *,
    compile_timeout_s: float,
    run_timeout_s: float,
    env: Mapping[str, str] | None = None,
    preload: tuple[str, ...] = (),
    max_tasks: int | None = DEFAULT_MAX_TASKS,
    max_rss_mb: float | None = DEFAULT_MAX_RSS_MB,
) -> dict[str, Any]:
    """Run a task in an idle warm worker for `env` of this process (started when none is idle).

    Workers are kept by `env`, `preload` and ``CUDA_VISIBLE_DEVICES``, so a Ray actor reused
    for a trial on another GPU gets a worker that sees that GPU; callers on several threads
    (a local search's evaluations) each take a worker of their own for the task.

    Args:
        target: ``"package.module:function"`` of the task.
        payload: Picklable argument of the task.
        compile_timeout_s: Seconds allowed for compilation.
        run_timeout_s: Seconds allowed for checking and benchmarking.
        env: Extra environment variables for the worker.
        preload: Modules a new worker imports before it takes tasks.
        max_tasks: Tasks after which the worker is replaced (see `IsolatedWorker`).
        max_rss_mb: Resident memory (MiB) above which the worker is replaced.

    Returns:
        The result dict (see `IsolatedWorker.run`).
    """
    key, full_env = _pool_key(env, preload, max_tasks, max_rss_mb)
    worker = _take(key, full_env)
    try:
        return worker.run(
            target, payload, compile_timeout_s=compile_timeout_s, run_timeout_s=run_timeout_s
        )
    finally:
        _put_back(key, worker)


def prestart(
    n: int,
    *,
    env: Mapping[str, str] | None = None,
    preload: tuple[str, ...] = (),
    max_tasks: int | None = DEFAULT_MAX_TASKS,
    max_rss_mb: float | None = DEFAULT_MAX_RSS_MB,
) -> None:
    """Start `n` workers for `env` in the background, so that their imports overlap whatever
    this process does before its first tasks; a task that takes one still starting waits for
    it (`IsolatedWorker.run` holds the worker's lock while it starts)."""
    key, full_env = _pool_key(env, preload, max_tasks, max_rss_mb)
    workers = [_take(key, full_env) for _ in range(n)]
    for worker in workers:
        started = threading.Event()

        threading.Thread(
            target=worker.warm_up, args=(started,), daemon=True, name="isolated-prestart"
        ).start()
        started.wait()  # the worker is held: a task that takes it waits for the start
        _put_back(key, worker)


def close_idle() -> None:
    """Stop this process's idle workers (a finished search's): the next task starts anew."""
    with _POOL_LOCK:
        idle = [w for workers in _IDLE.values() for w in workers]
    procs = []
    for worker in idle:
        with worker._lock:  # one still starting finishes its start first
            procs.append(worker._kill())
    _reap(procs)


@atexit.register
def _close_all() -> None:
    close_workers(_ALL)


def call_pickled(payload: Mapping[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """Task running user code: ``payload["call"]`` is ``cloudpickle.dumps((fn, args))``.

    Returns ``{"status": "ok", "value": cloudpickle.dumps(fn(*args))}``, or ``"error"`` with
    the exception when `fn` raises or its value cannot be pickled back. ``payload["sys_path"]``
    (the caller's ``sys.path``) lets functions pickled by reference be imported here.
    """
    import cloudpickle

    for entry in payload.get("sys_path", ()):
        if entry not in sys.path:
            sys.path.append(entry)
    fn, args = cloudpickle.loads(payload["call"])
    progress("compiled")  # loaded (imports done): the run timeout now covers the call alone
    try:
        value = fn(*args)
        return {"status": "ok", "value": cloudpickle.dumps(value)}
    except Exception as exc:  # user code: any exception is its outcome, the worker is sound
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}


def _resolve(target: str) -> Callable[..., Any]:
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise ValueError(
            f"`target` must look like 'package.module:function', got target={target!r}"
        )
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


PROFILE_ENV = "CIQ_TUNE_PROFILE"
"""A folder (made if missing): each worker profiles its tasks (`cProfile`) and writes
``<pid>.prof`` there after each, to see where an evaluation's time goes (``python -m
pstats``)."""


NICE_ENV = "CIQ_TUNE_NICE"
"""The niceness a worker adds to its own (`os.nice`) once its imports are done: compile workers
that run ahead of the GPU yield their CPUs to the search's loop and the GPU's benchmark
workers, which every evaluation waits on. Their imports keep the normal priority (CPU and
disk): the first evaluation waits on them."""


def _serve(recv: Connection, send: Connection, preload: list[str]) -> None:
    """The worker's loop: run tasks until the parent closes the pipe or goes away."""
    for module in preload:
        importlib.import_module(module)
    if os.environ.get(NICE_ENV):
        os.nice(int(os.environ[NICE_ENV]))
    send.send(("ready", os.getpid()))
    folder = os.environ.get(PROFILE_ENV)
    if folder:
        os.makedirs(folder, exist_ok=True)
    profile = cProfile.Profile() if folder else None

    def progress(phase: str) -> None:
        send.send(("phase", phase))

    while True:
        try:
            msg = recv.recv()
        except EOFError:  # the parent died or closed the pipe
            return
        _, target, payload = msg
        if profile is not None:
            profile.enable()
        try:
            result = _resolve(target)(payload, progress)
        except BaseException as exc:  # any escape means an unknown state: report, then retire
            result = {"status": "crash", "error": f"{type(exc).__name__}: {exc}", "restart": True}
        if profile is not None and folder:
            profile.disable()
            profile.dump_stats(os.path.join(folder, f"{os.getpid()}.prof"))
        send.send(("result", result))
        if isinstance(result, dict) and result.get("restart"):
            return


def main(argv: list[str]) -> None:
    """The worker process's entry: ``RECV_FD SEND_FD [PRELOAD_MODULE ...]``."""
    _serve(
        Connection(int(argv[0]), writable=False),
        Connection(int(argv[1]), readable=False),
        argv[2:],
    )
