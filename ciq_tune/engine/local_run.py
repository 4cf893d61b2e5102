"""An engine's ask/tell loop over local workers, no Ray: threads or forked processes.

The loop keeps `workers` evaluations in flight, tells the engine each result as it arrives and
asks for the next candidate at once, so a slow evaluation never holds up the others (the engine
runs steady-state). Evaluations that isolate themselves (a kernel compiled and timed in its own
worker process, `objectives`) run on threads; a plain Python objective runs in forked worker
processes, inherited through `fork` (closures and functions of an unguarded script work, nothing
is re-imported). A forked worker that dies is a ``crash`` of its evaluation, and the search
goes on in a new pool.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED
from concurrent.futures import Executor
from concurrent.futures import Future
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any
from typing import Generic
from typing import TypeVar

from ciq_tune.engine.base import Engine
from ciq_tune.engine.proposals import Candidate

Outcome = TypeVar("Outcome")

# The evaluation of a forked worker process (inherited at fork, never pickled).
_WORKER_EVALUATE: Callable[[Any], Any] | None = None


def _install(evaluate: Callable[[Any], Any]) -> None:
    global _WORKER_EVALUATE
    _WORKER_EVALUATE = evaluate


def _evaluate_in_worker(config: Any) -> Any:
    if _WORKER_EVALUATE is None:  # the pool's initializer always runs first
        raise RuntimeError("worker process started without an objective")
    return _WORKER_EVALUATE(config)


class LocalRun(Generic[Outcome]):
    """Runs an engine to its end with `workers` evaluations at a time.

    Args:
        engine: the ask/tell engine (its budget ends the run).
        evaluate: one evaluation of a configuration; returns its outcome, never raises.
        workers: evaluations at a time.
        isolated: `evaluate` isolates itself (its own worker process, timeouts): it is called
            from threads; else from forked worker processes.
        tell: tells the engine a candidate's outcome (and records it), in this process.
        crash: the outcome of an evaluation whose forked worker died, from the reason.
        stop: checked after each result; True ends the run (no new evaluations; those
            running are waited for and told).
    """

    def __init__(
        self,
        engine: Engine,
        evaluate: Callable[[Any], Outcome],
        *,
        workers: int,
        isolated: bool,
        tell: Callable[[Candidate, Outcome], None],
        crash: Callable[[str], Outcome],
        stop: Callable[[], bool] = lambda: False,
    ) -> None:
        if workers < 1:
            raise ValueError(f"`workers` must be >= 1, got workers={workers}")
        self.engine = engine
        self.evaluate = evaluate
        self.workers = workers
        self.isolated = isolated
        self.tell = tell
        self.crash = crash
        self.stop = stop
        self.wall_s = 0.0
        self.engine_s = 0.0  # in `engine.ask` and `tell`: the one thread every result waits on

    def _executor(self) -> Executor:
        if self.isolated:
            return ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="evaluation")
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_install,
            initargs=(self.evaluate,),
        )

    def _submit(self, executor: Executor, config: Any) -> Future[Outcome]:
        if self.isolated:
            return executor.submit(self.evaluate, config)
        return executor.submit(_evaluate_in_worker, config)

    def run(self) -> None:
        """Evaluate until the engine's budget is spent (or `stop`); candidates the engine had
        handed out before (an engine restored from its state) are evaluated first."""
        started = time.perf_counter()
        executor = self._executor()
        pending: dict[Future[Outcome], Candidate] = {}
        refused: Candidate | None = None  # asked, refused by a pool that broke before it ran
        restored = list(self.engine.pending)
        stopping = False
        try:
            while True:
                while not stopping and len(pending) < self.workers:
                    if refused is None and restored:
                        refused = restored.pop(0)
                    asked = time.perf_counter()
                    candidate, refused = refused or self.engine.ask(), None
                    self.engine_s += time.perf_counter() - asked
                    if candidate is None:
                        break
                    try:
                        pending[self._submit(executor, candidate.config)] = candidate
                    except BrokenProcessPool:
                        # A worker died since the last wait. Its task is pending, so the wait
                        # below sees the break and replaces the pool, which then takes this one.
                        refused = candidate
                        break
                if not pending:
                    break  # the budget is spent (or the engine waits on nothing: done)
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                broken = False
                for future in done:
                    candidate = pending.pop(future)
                    outcome, crashed = self._outcome(future)
                    broken = broken or crashed
                    told = time.perf_counter()
                    self.tell(candidate, outcome)
                    self.engine_s += time.perf_counter() - told
                    stopping = stopping or self.stop()
                if broken:  # a worker died: the pool is unusable; its other tasks died too
                    for candidate in list(pending.values()):
                        self.tell(candidate, self.crash("a sibling worker process died"))
                    pending.clear()
                    executor.shutdown(wait=False, cancel_futures=True)
                    executor = self._executor()
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
            self.wall_s = time.perf_counter() - started

    def _outcome(self, future: Future[Outcome]) -> tuple[Outcome, bool]:
        try:
            return future.result(), False
        except BrokenProcessPool as exc:
            return self.crash(f"the worker process died ({exc})"), True
        except Exception as exc:  # an evaluation that raised: recorded, the others go on
            return self.crash(f"the evaluation raised {type(exc).__name__}: {exc}"), False
