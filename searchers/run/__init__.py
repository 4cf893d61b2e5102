"""A run of ciq-tune from its options to its outputs folder: what `ciq-tune tune` and
`ciq-tune resume` do, `ciq_tune.tune_kernel` and campaigns go through.

- `options`: `TuneOptions`, the defaults and the checks before anything starts.
- `dispatch`: `tune`, the path a run takes (campaign, staged, matrix, one description).
- `single`: one description's search on Ray Tune trials or on local worker processes.
- `matrix`, `staged`, `campaign`: the other paths; `resume`: an interrupted run finished.
- `setup`: Ray, placement, benchmark servers, budget; `validate`: the top-k re-measured;
  `outputs`: the controls file and tables; `interrupt`: Ctrl+C keeps what finished.
- `tune_kernel`: a Triton kernel tuned from a script's example arguments.
"""

from __future__ import annotations

from searchers.run.dispatch import tune
from searchers.run.options import TuneOptions
from searchers.run.resume import resume
from searchers.run.tune_kernel import tune_kernel

__all__ = ["TuneOptions", "resume", "tune", "tune_kernel"]
