"""Host time ciq-tune adds to a Triton launch: `ciq_tune.runtime.tuned` and `ciq_tune.capture`.

    python -m bench.launch_overhead --launches 20000
    python3 -m bench.launch_overhead --gpu          # on a GPU: a real kernel, Triton's launch

Both wrap ``kernel[grid](*args)``; what they add is Python on the host, before Triton's own
launch (~9 µs on an H200). Without ``--gpu``, measured on a kernel whose launch does nothing (a
`KernelInterface` whose ``run`` returns at once), so that only the wrapper is timed: a plain
launch of it, the same through ``@tuned(file)`` (arguments bound, sizes read off the tensors,
the configuration of their size key from its cache) and inside ``capture`` (a launch of an
already recorded signature). Prints microseconds per launch, the median of 5 repetitions.

With ``--gpu``, the kernel is that RMS norm's ``@triton.jit`` body at one row of 4096, so that the
host, not the GPU, sets the pace: its plain launch with the tuned configuration's arguments
written out against ``@tuned(file)``, timed in alternation (21 × 1,000 launches each, the GPU
drained between them, `bench.shipped_kernels.host_us_per_launch`), so that the difference is
what the decorator adds to Triton's own launch; then the functions where each spends its host
time (cProfile).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from triton.runtime.jit import KernelInterface

if TYPE_CHECKING:
    from ciq_tune.controls.controls_file import KernelInfo
    from ciq_tune.controls.matrix import MatrixEntry


class NoOpKernel(KernelInterface[Any]):
    """A kernel whose launch does nothing (the wrapper alone is timed)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.arg_names = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        return None


def rms_norm_forward(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, n_cols, eps, BLOCK_SIZE):  # type: ignore[no-untyped-def]
    """The signature of a shipped RMS norm (tests/objectives/data/rms_norm_shipped.py)."""


def _controls_file(folder: Path, rows: int = 4096) -> Path:
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.controls.matrix import MatrixEntry
    from ciq_tune.controls.matrix import ShapeResult

    entry = MatrixEntry(
        key={"M": rows, "N": 4096},
        params={"BLOCK_SIZE": 4096},
        controls={"triton": {"num_warps": 8}},
        shapes=[ShapeResult(sizes={"M": rows, "N": 4096}, baseline=2.0, best=1.0)],
    )
    kernel = cf.KernelInfo(
        name="rms", kind="triton", source="rms.py", source_sha256="0" * 64, arch="sm_90"
    )
    return rms_controls_file(folder, kernel, [entry])


def rms_controls_file(folder: Path, kernel: KernelInfo, entries: Sequence[MatrixEntry]) -> Path:
    """A per-shape controls file of the shipped RMS norm (`rms_norm_forward`'s arguments),
    `entries` its (M, N) shapes' configurations, written to ``folder/<kernel name>``; the first
    entry gives the file's own configuration and sizes."""
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.controls import detect_triton
    from ciq_tune.controls.matrix import Matrix
    from ciq_tune.controls.matrix import SelectionRule

    first = entries[0]
    record = cf.build(
        kernel=kernel,
        catalogs={"triton": detect_triton(kernel.arch)},
        controls=first.controls,
        params=first.params,
        benchmark=cf.Benchmark(
            metric="time_ms",
            mode="min",
            sizes=dict(first.key),
            dims={"X_ptr": ["M", "N"], "W_ptr": ["N"], "Y_ptr": ["M", "N"]},
            arguments={"Y_row_stride": "N", "X_row_stride": "N", "n_cols": "N"},
        ),
        scores=cf.Scores(baseline=2.0, best=1.0),
        matrix=Matrix(
            selection=SelectionRule(mode="per_shape", key=["M", "N"]),
            metric="time_ms",
            entries=list(entries),
        ),
    )
    return cf.write(folder / f"{kernel.name}.controls.yaml", record)


def per_launch_us(launch: Callable[[], Any], launches: int) -> float:
    """Median over 5 repetitions of the microseconds per call of `launch`."""
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(launches):
            launch()
        runs.append((time.perf_counter() - t0) / launches * 1e6)
    return statistics.median(runs)


def on_gpu(folder: Path) -> int:
    """`--gpu`: the real kernel's plain launch against `@tuned`, then where each spends."""
    import cProfile
    import pstats

    import torch

    import ciq_tune.runtime
    from bench.shipped_kernels import host_us_per_launch
    from tests.objectives.data.rms_norm_shipped import rms_norm_body as rms_norm_jit

    x = torch.randn(1, 4096, device="cuda")
    w, y = torch.randn(4096, device="cuda"), torch.empty_like(x)
    call = (y, y.stride(0), x, x.stride(0), w, 4096, 1e-6)
    tuned = ciq_tune.runtime.tuned(_controls_file(folder, rows=1))(rms_norm_jit)
    launches = {
        "plain": lambda: rms_norm_jit[(1,)](*call, BLOCK_SIZE=4096, num_warps=8),
        "tuned": lambda: tuned[(1,)](*call),
    }
    for launch in launches.values():
        launch()  # compiled and cached before anything is timed
    us = host_us_per_launch(launches["plain"], launches["tuned"])
    print("| launch (real kernel, GPU) | µs per launch (host), median | added µs, median paired |")
    print("|---|---|---|")
    print(f"| plain `kernel[grid](…)` | {us['plain']:.2f} | 0 |")
    print(f"| `@tuned(file)` | {us['tuned']:.2f} | {us['added']:.2f} |")
    for name, launch in launches.items():
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(5000):
            launch()
        profile.disable()
        print(f"\n{name}, 5,000 launches under cProfile:")
        pstats.Stats(profile).sort_stats("tottime").print_stats(8)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20000)
    parser.add_argument("--gpu", action="store_true", help="a real kernel on a GPU")
    args = parser.parse_args(argv)
    if args.gpu:
        with tempfile.TemporaryDirectory() as folder:
            return on_gpu(Path(folder))
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
