"""`Search`'s local workers: the engine's ask/tell loop over forked worker processes, no Ray.

CompileIQ's default worker evaluates on local processes; so does this one. A NATIVE or ASYNC
search keeps `num_workers` forked processes for its whole run (the objective is inherited
through `fork`, so closures and functions of an unguarded script work, nothing is re-imported);
an ISOLATED search (or one with `task_timeout`) starts one fresh process per evaluation and
kills it at the timeout. Only `WorkerTypes.RAY` goes through Ray Tune.
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

from ciq_tune.compat.config import INVALID_SCORE
from ciq_tune.compat.evaluate import Outcome
from ciq_tune.compat.results import score_columns
from ciq_tune.engine import Candidate
from ciq_tune.engine import Engine
from ciq_tune.results import OK

Evaluate = Callable[[Any], Outcome]

# The objective of a forked worker process (inherited at fork, never pickled).
_WORKER_EVALUATE: Evaluate | None = None


def _install(evaluate: Evaluate) -> None:
    global _WORKER_EVALUATE
    _WORKER_EVALUATE = evaluate


def _evaluate_in_worker(config: Any) -> Outcome:
    if _WORKER_EVALUATE is None:  # the pool's initializer always runs first
        raise RuntimeError("worker process started without an objective")
    return _WORKER_EVALUATE(config)


class LocalRun:
    """Runs an engine to its end with `workers` evaluations at a time.

    Args:
        engine: the ask/tell engine (its budget ends the run).
        evaluate: one evaluation of a configuration (an `Outcome`, never an exception).
        workers: evaluations at a time.
        isolated: `evaluate` starts its own process per evaluation (ISOLATED, task_timeout);
            it is then called from threads.
        on_result: called in this process after each evaluation is told to the engine.
        stop: checked after each result; True ends the run (no new evaluations; those
            running are waited for and recorded).
    """

    def __init__(
        self,
        engine: Engine,
        evaluate: Evaluate,
        *,
        workers: int,
        isolated: bool,
        on_result: Callable[[Candidate, Outcome], None],
        stop: Callable[[], bool],
    ) -> None:
        self.engine = engine
        self.evaluate = evaluate
        self.workers = workers
        self.isolated = isolated
        self.on_result = on_result
        self.stop = stop
        self.wall_s = 0.0

    def _executor(self) -> Executor:
        if self.isolated:
            return ThreadPoolExecutor(max_workers=self.workers)
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
        started = time.perf_counter()
        executor = self._executor()
        pending: dict[Future[Outcome], Candidate] = {}
        refused: Candidate | None = None  # asked, refused by a pool that broke before it ran
        stopping = False
        try:
            while True:
                while not stopping and len(pending) < self.workers:
                    candidate, refused = refused or self.engine.ask(), None
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
                    self._tell(candidate, outcome)
                    stopping = stopping or self.stop()
                if broken:  # a worker died: the pool is unusable; its other tasks died too
                    for candidate in list(pending.values()):
                        self._tell(candidate, self._crash("a sibling worker process died"))
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
            return self._crash(f"the worker process died ({exc})"), True

    def _crash(self, why: str) -> Outcome:
        n = len(self.engine.objectives)
        return Outcome([INVALID_SCORE] * n, "crash", why)

    def _tell(self, candidate: Candidate, outcome: Outcome) -> None:
        names = score_columns(len(outcome.scores))
        values = (
            dict(zip(names, [float(s) for s in outcome.scores], strict=True))
            if outcome.status == OK
            else None
        )
        info = {"error": outcome.error} if outcome.error else {}
        self.engine.tell(candidate.id, values, status=outcome.status, info=info)
        self.on_result(candidate, outcome)
