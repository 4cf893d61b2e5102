"""`Search`'s local workers: the engine's ask/tell loop (`ciq_tune.engine.local_run`) over
forked worker processes, no Ray.

CompileIQ's default worker evaluates on local processes; so does this one. A NATIVE or ASYNC
search keeps `num_workers` forked processes for its whole run; an ISOLATED search (or one with
`task_timeout`) starts one fresh process per evaluation and kills it at the timeout. Only
`WorkerTypes.RAY` goes through Ray Tune.
"""

from __future__ import annotations

from collections.abc import Callable

from ciq_tune.compat.config import INVALID_SCORE
from ciq_tune.compat.evaluate import Outcome
from ciq_tune.compat.results import score_columns
from ciq_tune.engine import Candidate
from ciq_tune.engine import Engine
from ciq_tune.engine.local_run import LocalRun
from ciq_tune.results import OK

__all__ = ["LocalRun", "local_run"]


def local_run(
    engine: Engine,
    evaluate: Callable[[object], Outcome],
    *,
    workers: int,
    isolated: bool,
    on_result: Callable[[Candidate, Outcome], None],
    stop: Callable[[], bool],
) -> LocalRun[Outcome]:
    """The run of a `Search` on `workers` local processes; `on_result` is called after each
    outcome is told to the engine."""
    n = len(engine.objectives)

    def tell(candidate: Candidate, outcome: Outcome) -> None:
        names = score_columns(len(outcome.scores))
        values = (
            dict(zip(names, [float(s) for s in outcome.scores], strict=True))
            if outcome.status == OK
            else None
        )
        info = {"error": outcome.error} if outcome.error else {}
        engine.tell(candidate.id, values, status=outcome.status, info=info)
        on_result(candidate, outcome)

    return LocalRun(
        engine,
        evaluate,
        workers=workers,
        isolated=isolated,
        tell=tell,
        crash=lambda why: Outcome([INVALID_SCORE] * n, "crash", why),
        stop=stop,
    )
