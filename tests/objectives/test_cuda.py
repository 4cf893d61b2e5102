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
