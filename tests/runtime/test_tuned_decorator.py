"""`ciq_tune.runtime.tuned`: a shipped kernel (its own @triton.autotune, strides between the
pointers) launched unmodified with its tuned configurations, under Triton's interpreter."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from bench.launch_overhead import rms_controls_file
from ciq_tune.controls import controls_file as cf
from ciq_tune.controls.matrix import MatrixEntry
from ciq_tune.controls.matrix import ShapeResult
from ciq_tune.errors import ControlsFileError
from tests.interpreted import run_interpreted

REPO = Path(__file__).resolve().parents[2]
KERNEL = REPO / "tests/objectives/data/rms_norm_shipped.py"
# Tuned shapes (M, N) and their warps.
TUNED = {(3, 40): 1, (4, 100): 2}


def _write(folder: Path, *, arch: str = "sm_90") -> Path:
    entries = [
        MatrixEntry(
            key={"M": m, "N": n},
            params={"num_warps": warps},
            shapes=[ShapeResult(sizes={"M": m, "N": n}, baseline=2.0, best=1.0)],
        )
        for (m, n), warps in TUNED.items()
    ]
    kernel = cf.KernelInfo(
        name="rms_norm_shipped",
        kind="triton",
        source=str(KERNEL),
        source_sha256="0" * 64,
        entry="rms_norm_forward",
        arch=arch,
    )
    return rms_controls_file(folder, kernel, entries)


LAUNCHES = """
import json, sys, warnings
import torch
import ciq_tune.runtime as rt
from objectives.triton_entry import load_module
kernel = rt.tuned(sys.argv[1])(load_module(sys.argv[2]).rms_norm_forward)
out = {}
for m, n in [(3, 40), (4, 100), (5, 64), (5, 64)]:
    x, w = torch.randn(m, n), torch.randn(n)
    y = torch.full_like(x, float("nan"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel[(m,)](y, y.stride(0), x, x.stride(0), w, n, 1e-6)
    expected = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    out.setdefault(f"{m}x{n}", []).append({
        "error": float((y - expected).abs().max()),
        "config": kernel.configuration({"X_ptr": x, "n_cols": n}),
        "warnings": [str(c.message) for c in caught],
    })
json.dump(out, sys.stdout)
"""


def _launch_in_a_process(path: Path) -> dict:
    return run_interpreted(LAUNCHES, str(path), str(KERNEL))


def test_the_unmodified_kernel_launches_with_each_shapes_tuned_configuration(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path)
    first = _launch_in_a_process(path)
    for (m, n), warps in TUNED.items():
        (run,) = first[f"{m}x{n}"]
        assert run["config"] == {"num_warps": warps} and run["warnings"] == []
        assert run["error"] < 1e-4
    # Untuned sizes take the nearest tuned shape, with one warning the first time only.
    once, again = first["5x64"]
    assert once["error"] < 1e-4 and again["error"] < 1e-4
    assert len(once["warnings"]) == 1 and "nearest" in once["warnings"][0]
    assert again["warnings"] == [] and again["config"] == once["config"]
    # No timing at launch: another process picks the same configurations.
    second = _launch_in_a_process(path)
    assert {k: [r["config"] for r in v] for k, v in second.items()} == {
        k: [r["config"] for r in v] for k, v in first.items()
    }


def _kernel(path: Path, **options: bool) -> object:
    import ciq_tune.runtime as rt
    from objectives.triton_entry import load_module

    return rt.tuned(path, **options)(load_module(str(KERNEL)).rms_norm_forward)


def test_a_file_tuned_for_another_gpu_or_triton_is_refused_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import triton

    import ciq_tune.runtime.decorator as decorator

    path = _write(tmp_path, arch="sm_90a")
    launch = {"X_ptr": types.SimpleNamespace(shape=(3, 40)), "n_cols": 40}
    monkeypatch.setattr(decorator, "_device_arch", lambda: "sm_90")
    assert _kernel(path).configuration(launch) == {"num_warps": 1}  # sm_90a is an sm_90
    monkeypatch.setattr(decorator, "_device_arch", lambda: "sm_80")
    with pytest.raises(ControlsFileError, match=r"tuned for sm_90a, this GPU is sm_80") as info:
        _kernel(path).configuration(launch)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    assert _kernel(path, allow_mismatch=True).configuration(launch) == {"num_warps": 1}
    monkeypatch.setattr(decorator, "_device_arch", lambda: None)
    monkeypatch.setattr(triton, "__version__", "0.0.1")
    with pytest.raises(ControlsFileError, match=r"tuned for Triton .*, this is 0\.0\.1"):
        _kernel(path).configuration(launch)
