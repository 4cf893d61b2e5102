"""Tests of the CUDA C++ trainable: nvcc argv, compile cache, failures as data, GPU run."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from ciq_tune.errors import CompileError
from ciq_tune.errors import InvalidControl
from objectives._compile import CompileCache
from objectives.cuda import compile_candidate
from objectives.cuda import make_trainable
from objectives.cuda import nvcc_argv
from objectives.description import load_description

ROW_SUM = Path(__file__).parents[2] / "examples/kernels/cuda/row_sum.yaml"
PARAMS = {"BLOCK": 256, "ROWS": 2, "VEC": 4, "UNROLL": 4}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")


@needs_nvcc
def test_argv_has_target_defines_and_controls():
    desc = load_description(ROW_SUM)
    argv = nvcc_argv(desc, PARAMS, {"maxrregcount": 64, "ptxas": {"opt_level": 2}})
    assert "-gencode=arch=compute_90,code=sm_90" in argv
    assert "-DBLOCK=256" in argv and "-DUNROLL=4" in argv
    assert argv[-3:] == ["--maxrregcount=64", "-Xptxas", "--opt-level=2"]
    with pytest.raises(InvalidControl, match="maxrregcount"):
        nvcc_argv(desc, PARAMS, {"maxrregcount": 7})


@needs_nvcc
def test_compile_reports_registers_and_uses_cache(tmp_path):
    desc = load_description(ROW_SUM)
    cache = CompileCache(tmp_path)
    first = compile_candidate(desc, PARAMS, {"maxrregcount": 32}, cache=cache)
    again = compile_candidate(desc, PARAMS, {"maxrregcount": 32}, cache=cache)
    other = compile_candidate(desc, PARAMS, {}, cache=cache)
    assert not first["cached"] and first["compile_s"] > 0
    assert 0 < first["registers"] <= 32 and first["cubin"][:4] == b"\x7fELF"
    assert again["cached"] and again["compile_s"] == 0 and again["cubin"] == first["cubin"]
    assert not other["cached"]


@needs_nvcc
def test_bad_parameter_is_a_compile_error(tmp_path):
    desc = load_description(ROW_SUM)
    with pytest.raises(CompileError, match=r"Vec<3>"):
        compile_candidate(desc, {**PARAMS, "VEC": 3}, {}, cache=CompileCache(tmp_path))


@needs_nvcc
def test_trainable_reports_compile_error_as_data():
    trainable = make_trainable(load_description(ROW_SUM))
    result = trainable({"params": {**PARAMS, "VEC": 3}})
    assert result["status"] == "compile_error" and "Vec<3>" in result["error"]
    assert math.isnan(result["time_ms"])


@pytest.mark.gpu
def test_row_sum_on_gpu_checks_and_times():
    result = make_trainable(load_description(ROW_SUM))({"params": PARAMS})
    assert result["status"] == "ok", result
    # 256 MiB read at 0.3–4 TB/s
    assert 0.06 < result["time_ms"] < 1.0
    assert result["rel_err"] < 1e-5


SAXPY = Path(__file__).resolve().parents[2] / "examples" / "kernels" / "cuda" / "saxpy.yaml"


def test_scalar_arguments_follow_pointers_and_sizes_and_reach_the_reference() -> None:
    import numpy as np
    import torch

    from objectives._bench import reference_outputs
    from objectives.cuda import kernel_arguments

    desc = load_description(SAXPY)
    args = kernel_arguments(desc, [11, 22, 33])
    assert [type(a) for a in args] == [np.uint64] * 3 + [np.int32, np.float32]
    assert [int(a) for a in args[:4]] == [11, 22, 33, 16777216] and float(args[4]) == 2.5
    x, y = torch.ones(4), torch.full((4,), 3.0)
    (out,) = reference_outputs(desc, {"x": x, "y": y, "out": torch.zeros(4)})
    assert out.tolist() == [5.5] * 4


@needs_nvcc
def test_saxpy_with_a_float_scalar_compiles(tmp_path):
    desc = load_description(SAXPY)
    built = compile_candidate(desc, {"BLOCK": 128, "ITEMS": 2}, {}, cache=CompileCache(tmp_path))
    assert built["cubin"] and built["registers"] > 0


def test_a_scalar_may_not_shadow_a_size(tmp_path) -> None:
    from ciq_tune.errors import DescriptionError

    text = SAXPY.read_text().replace("scalars: {a: 2.5}", "scalars: {n: 2.5}")
    (tmp_path / "saxpy.cu").write_text("// k\n")
    (tmp_path / "saxpy.yaml").write_text(text)
    with pytest.raises(DescriptionError, match=r"scalars \['n'\] also name a size"):
        load_description(tmp_path / "saxpy.yaml")


# A process where torch and Triton cannot be imported (tests/objectives/data/no_torch): the CUDA
# C++ path, from the trainable through the isolated worker's compile, launch, check and
# CUDA-event timing, must run there. Without a GPU, CuPy is a host-memory stand-in
# (tests/objectives/data/fake_cupy); on a GPU, the real one.
DATA = Path(__file__).parent / "data"
_WITHOUT_TORCH = """
import json, sys
try:
    import torch
    blocked = False
except ImportError:
    blocked = True
from objectives.cuda import make_trainable
from objectives.description import load_description
result = make_trainable(load_description(sys.argv[1]))({"params": {"BLOCK": 128, "ITEMS": 2}})
print(json.dumps({"blocked": blocked, "torch": "torch" in sys.modules, "result": result}))
"""


def _saxpy_without_torch(tmp_path: Path, *, n: int, fake_cupy: bool, **env: str) -> dict:
    import json
    import os
    import subprocess
    import sys

    shutil.copy(SAXPY.with_suffix(".cu"), tmp_path / "saxpy.cu")
    text = SAXPY.read_text().replace("n: 16777216", f"n: {n}")
    (tmp_path / "saxpy.yaml").write_text(text)
    path = [DATA / "no_torch", *([DATA / "fake_cupy"] if fake_cupy else []), SAXPY.parents[3]]
    run = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TORCH, str(tmp_path / "saxpy.yaml")],
        env={
            **os.environ,
            # the stand-ins first; then whatever this process was given (installed wheels)
            "PYTHONPATH": os.pathsep.join([*map(str, path), os.environ.get("PYTHONPATH", "")]),
            "CIQ_TUNE_CACHE": str(tmp_path / "cache"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out: dict = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["blocked"] and not out["torch"]
    return out["result"]


@needs_nvcc
def test_cuda_kernel_checks_and_times_without_torch(tmp_path):
    result = _saxpy_without_torch(tmp_path, n=4096, fake_cupy=True, CIQ_TUNE_LOCK_DIR=str(tmp_path))
    assert result["status"] == "ok", result
    assert result["timer"] == "cuda_events" and result["n"] >= 1
    assert math.isfinite(result["time_ms"]) and result["time_ms"] > 0
    assert result["rel_err"] < 1e-6 and result["n_rotate"] == 8
    assert result["gpu_s"] > 0 and result["registers"] > 0
    # The GPU lock is named after the PCI id in NVML's form, as torch-side trials name it.
    assert (tmp_path / "ciq-tune-gpu-00000000-c1-00-0.lock").exists()


@needs_nvcc
def test_cuda_kernel_wrong_result_without_torch(tmp_path):
    # The stand-in kernel leaves `out` as the harness poisoned it (NaN).
    result = _saxpy_without_torch(tmp_path, n=4096, fake_cupy=True, FAKE_CUPY_WRONG="1")
    assert result["status"] == "wrong_result", result
    assert "'out'" in result["error"] and "4096 NaN" in result["error"]
    assert math.isnan(result["time_ms"])


@pytest.mark.gpu
def test_saxpy_on_gpu_without_torch(tmp_path):
    pytest.importorskip("cupy", reason="needs CuPy: pip install 'ciq-tune[cuda]'")
    result = _saxpy_without_torch(tmp_path, n=16777216, fake_cupy=False)
    assert result["status"] == "ok", result
    # 192 MiB moved (x, y read; out written): 0.02 ms at 10 TB/s, 2 ms at 0.1 TB/s.
    assert 0.02 < result["time_ms"] < 2.0 and result["n"] > 5
    assert result["rel_err"] < 1e-6 and result["timer"] == "cuda_events"


@pytest.mark.gpu
def test_cuda_graph_timing_agrees_with_the_protocol_through_cupy():
    pytest.importorskip("cupy", reason="needs CuPy: pip install 'ciq-tune[cuda]'")
    from objectives.verify import verify_config

    desc = load_description(SAXPY)
    result = verify_config(desc, {"params": {"BLOCK": 256, "ITEMS": 4}}, rounds=5)
    assert not result["protocol"]["skipped"], result["protocol"]["skipped"]
    # The two methods differ by a constant per-launch overhead only (objectives/verify.py).
    for name, ratio in result["agreement"].items():
        assert 0.7 < ratio < 1.3, (name, ratio)
