"""Host time ciq-tune adds to a Triton launch: `ciq_tune.runtime.tuned` and `ciq_tune.capture`.

    python -m bench.launch_overhead --launches 20000

Both wrap ``kernel[grid](*args)``; what they add is Python on the host, before Triton's own
launch (~9 µs on an H200). Measured here without a GPU on a kernel whose launch does nothing
(a `KernelInterface` whose ``run`` returns at once), so that only the wrapper is timed: a plain
launch of it, the same through ``@tuned(file)`` (arguments bound, sizes read off the tensors,
the configuration of their size key from its cache) and inside ``capture`` (a launch of an
already recorded signature). Prints microseconds per launch, the median of 5 repetitions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from triton.runtime.jit import KernelInterface


class NoOpKernel(KernelInterface[Any]):
    """A kernel whose launch does nothing (the wrapper alone is timed)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.arg_names = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        return None


def rms_norm_forward(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, n_cols, eps, BLOCK_SIZE):  # type: ignore[no-untyped-def]
    """The signature of a shipped RMS norm (tests/objectives/data/rms_norm_shipped.py)."""


def _controls_file(folder: Path) -> Path:
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.controls import detect_triton
    from ciq_tune.controls.matrix import Matrix
    from ciq_tune.controls.matrix import MatrixEntry
    from ciq_tune.controls.matrix import SelectionRule
    from ciq_tune.controls.matrix import ShapeResult

    entry = MatrixEntry(
        key={"M": 4096, "N": 4096},
        params={"BLOCK_SIZE": 4096},
        controls={"triton": {"num_warps": 8}},
        shapes=[ShapeResult(sizes={"M": 4096, "N": 4096}, baseline=2.0, best=1.0)],
    )
    record = cf.build(
        kernel=cf.KernelInfo(
            name="rms", kind="triton", source="rms.py", source_sha256="0" * 64, arch="sm_90"
        ),
        catalogs={"triton": detect_triton("sm_90")},
        controls=entry.controls,
        params=entry.params,
        benchmark=cf.Benchmark(
            metric="time_ms",
            mode="min",
            sizes={"M": 4096, "N": 4096},
            dims={"X_ptr": ["M", "N"], "W_ptr": ["N"], "Y_ptr": ["M", "N"]},
            arguments={"Y_row_stride": "N", "X_row_stride": "N", "n_cols": "N"},
        ),
        scores=cf.Scores(baseline=2.0, best=1.0),
        matrix=Matrix(
            selection=SelectionRule(mode="per_shape", key=["M", "N"]),
            metric="time_ms",
            entries=[entry],
        ),
    )
    return cf.write(folder / "rms.controls.yaml", record)


def per_launch_us(launch: Callable[[], Any], launches: int) -> float:
    """Median over 5 repetitions of the microseconds per call of `launch`."""
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(launches):
            launch()
        runs.append((time.perf_counter() - t0) / launches * 1e6)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20000)
    args = parser.parse_args(argv)
    import torch

    import ciq_tune
    import ciq_tune.runtime

    kernel = NoOpKernel(rms_norm_forward)
    x, w = torch.empty(4096, 4096), torch.empty(4096)
    y = torch.empty_like(x)
    call = (y, y.stride(0), x, x.stride(0), w, 4096, 1e-6)
    with tempfile.TemporaryDirectory() as folder:
        tuned = ciq_tune.runtime.tuned(_controls_file(Path(folder)))(kernel)
        rows = {
            "plain launch": per_launch_us(
                lambda: kernel[(4096,)](*call, BLOCK_SIZE=4096), args.launches
            ),
            "@tuned(file)": per_launch_us(lambda: tuned[(4096,)](*call), args.launches),
        }
        with ciq_tune.capture("rms_norm_forward"):
            kernel[(4096,)](*call, BLOCK_SIZE=4096)  # the signature's first launch is copied
            rows["inside capture"] = per_launch_us(
                lambda: kernel[(4096,)](*call, BLOCK_SIZE=4096), args.launches
            )
    print("| launch | µs per launch (host) | added µs |")
    print("|---|---|---|")
    for name, us in rows.items():
        print(f"| {name} | {us:.2f} | {us - rows['plain launch']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
