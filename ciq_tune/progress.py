"""A search's progress line and failure summary: done/budget, best so far, evals/s, failures
by status with the first cause of each."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import KW_ONLY
from dataclasses import dataclass
from dataclasses import field
from typing import TextIO

from ciq_tune.results import OK
from ciq_tune.results import one_line_error

# Characters of a failure cause kept in a one-line summary.
CAUSE_CHARS = 160


def one_line(text: str, limit: int = CAUSE_CHARS) -> str:
    """The last non-empty line of `text` (where tools put the actual error), cut to `limit`."""
    line = one_line_error(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass(eq=False)
class Progress:
    """Counts a search's evaluations and prints a progress line at most every `interval_s`.

    Args:
        metric: the metric shown as "best so far".
        mode: "min" or "max".
        budget: evaluations planned, if known.
        quiet: count only, print nothing.
        stream: where lines go (default: `sys.stderr` when printing; looked up then, so that
            a pickled copy, as Tune makes of its callbacks, holds no open file).
        interval_s: the shortest time between two printed lines.
        done_before: evaluations made before this count began (a resumed run's), added to
            the count shown, not to the rate.
    """

    metric: str
    mode: str
    _: KW_ONLY
    budget: int | None = None
    quiet: bool = False
    stream: TextIO | None = None
    interval_s: float = 2.0
    done_before: int = 0
    # The count so far: evaluations, the best value, failures by status and the first cause
    # of each.
    done: int = field(default=0, init=False)
    best: float | None = field(default=None, init=False)
    failures: dict[str, int] = field(default_factory=dict, init=False)
    first_cause: dict[str, str] = field(default_factory=dict, init=False)
    _started: float = field(default_factory=time.monotonic, init=False)
    _printed: float = field(default=0.0, init=False)

    def update(self, status: str, value: float | None = None, error: str | None = None) -> None:
        """Count one finished evaluation; print the line when `interval_s` has passed."""
        self.done += 1
        if status == OK and value is not None and math.isfinite(value):
            better = self.best is None or (
                value < self.best if self.mode == "min" else value > self.best
            )
            self.best = value if better else self.best
        elif status != OK:
            self.failures[status] = self.failures.get(status, 0) + 1
            if error and status not in self.first_cause:
                self.first_cause[status] = one_line(error)
        now = time.monotonic()
        if not self.quiet and now - self._printed >= self.interval_s:
            self._printed = now
            print(self.line(), file=self.stream or sys.stderr, flush=True)

    def line(self) -> str:
        """`12/40 evaluations, best spill_bytes 1116, 1.8 evals/s, failed: timeout 1`."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        total = f"/{self.budget}" if self.budget else ""
        best = "none yet" if self.best is None else f"{self.best:g}"
        text = (
            f"{self.done_before + self.done}{total} evaluations, best {self.metric} {best}, "
            f"{self.done / elapsed:.2f} evals/s"
        )
        if self.failures:
            text += ", failed: " + ", ".join(f"{s} {n}" for s, n in sorted(self.failures.items()))
        return text

    def failure_summary(self) -> str:
        """`3 of 40 failed: timeout 2 (first: …), compile_error 1 (first: …)`, or ""."""
        failed = sum(self.failures.values())
        if not failed:
            return ""
        parts = []
        for status, count in sorted(self.failures.items(), key=lambda kv: (-kv[1], kv[0])):
            cause = self.first_cause.get(status)
            parts.append(f"{status} {count}" + (f" (first: {cause})" if cause else ""))
        return f"{failed} of {self.done} failed: " + "; ".join(parts)
