"""`ciq_tune.tune_kernel`: tune a Triton kernel from a script, on its real example arguments,
with no description file to write.

    tuned = ciq_tune.tune_kernel(rms_norm_forward, y, y.stride(0), x, x.stride(0), w, n, 1e-6,
                                 grid=(m,), budget=40, out="tuned/")
    tuned.config_for(...)        # ciq_tune.runtime.TunedKernel of tuned/<kernel>.controls.yaml

The kernel is launched once on the arguments under `ciq_tune.capture`, which writes its
description (OUT/<kernel>.yaml: the shapes, strides and scalars of that launch, the kernel as
shipped as the reference); `params` replaces the captured space. Then ``ciq-tune tune`` runs on
that file (`searchers.run.tune`, as ``ciq-tune tune`` runs it), with the same searches and
outputs, so the description can be kept, edited and tuned again from the CLI or CI.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ciq_tune.errors import CiqTuneError


def tune_kernel(
    kernel: Any,
    *args: Any,
    grid: Any,
    params: Mapping[str, Any] | None = None,
    budget: int = 50,
    out: str | Path = "ciq-tune-out",
    options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Tune `kernel` (a ``@triton.jit`` function, possibly under its own autotune/heuristics) on
    ``kernel[grid](*args, **kwargs)``; returns the `ciq_tune.runtime.TunedKernel` of its
    controls file.

    Args:
        kernel: The kernel as its project ships it.
        args, kwargs: One launch's arguments (the tensors are launched once to capture them).
        grid: That launch's grid.
        params: The search space of kernel parameters (`params` of a description); default:
            the captured one (launch options and the kernel's own autotune values).
        budget: Evaluations (``--budget``).
        out: The output folder: the description, the controls file and everything ``tune``
            writes.
        options: More options of the run, fields of `searchers.run.TuneOptions`, e.g.
            ``{"num_cpus": 2, "validate_top": 0}``.

    Raises:
        CiqTuneError: the capture or the search failed (its one-line reason).
    """
    from ciq_tune.runtime import load
    from objectives.capture import capture
    from objectives.capture import describe
    from searchers.run.dispatch import tune
    from searchers.run.options import TuneOptions

    with capture("*") as recorder:
        kernel[grid](*args, **kwargs)
    if len(recorder.launches) != 1:
        raise CiqTuneError(f"`kernel`: expected one Triton kernel launch, got {recorder.launches}")
    (launches,) = recorder.launches.values()
    data = describe(launches)
    if params is not None:
        data["params"] = {name: dict(spec) for name, spec in params.items()}
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{launches.name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    run = TuneOptions(descriptions=(path,), budget=budget, out=folder, **(options or {}))
    status = tune(run)
    if status != 0:
        raise CiqTuneError(f"the run of {path} ended with status {status} (its message is above)")
    return load(folder / f"{launches.name}.controls.yaml")
