"""Tests of the array libraries of the harness (objectives/_arrays.py): CuPy's side against the
host-memory stand-in of tests/objectives/data/fake_cupy, torch's against torch on the CPU."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from objectives._arrays import CUPY
from objectives._arrays import TORCH
from objectives._arrays import arrays_for
from objectives._arrays import evaluate_expression
from objectives._bench import compare
from objectives._bench import make_inputs
from objectives._bench import reference_outputs
from objectives.description import load_description

SAXPY = Path(__file__).resolve().parents[2] / "examples" / "kernels" / "cuda" / "saxpy.yaml"


@pytest.fixture
def fake_cupy(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "data" / "fake_cupy"))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    import cupy

    yield cupy
    sys.modules.pop("cupy", None)


def test_each_kind_has_its_library():
    assert arrays_for("cuda") is CUPY
    assert arrays_for("triton") is TORCH and arrays_for("helion") is TORCH


def test_cupy_bus_id_is_nvmls_form(fake_cupy):
    # CUDA says "0000:C1:00.0"; torch-derived ids and lock files use NVML's "00000000:c1:00.0".
    assert CUPY.pci_bus_id(0) == "00000000:c1:00.0"
    with pytest.raises(RuntimeError, match="no visible CUDA device 3"):
        CUPY.pci_bus_id(3)


def test_cupy_inputs_are_seeded_poisoned_and_never_zero(fake_cupy):
    desc = load_description(SAXPY).at_shape({"n": 1000})
    first = make_inputs(desc, seed=7, device="cuda", arrays=CUPY)
    again = make_inputs(desc, seed=7, device="cuda", arrays=CUPY)
    assert set(first) == {"x", "y", "out"} and first["x"].dtype == np.float32
    assert np.array_equal(first["x"], again["x"]) and not np.array_equal(first["x"], first["y"])
    assert np.all(first["x"] != 0) and np.all(np.isnan(first["out"]))
    with pytest.raises(ValueError, match="device='cpu'"):
        make_inputs(desc, seed=7, device="cpu", arrays=CUPY)


def test_cupy_random_kinds_and_poison(fake_cupy):
    gen = CUPY.generator(1, "cuda")
    ints = CUPY.random_array((500,), "int32", "randn", generator=gen, device="cuda")
    flags = CUPY.random_array((500,), "bool", "randint", generator=gen, device="cuda")
    unsigned = CUPY.random_array((500,), "uint8", "rand", generator=gen, device="cuda")
    assert ints.dtype == np.int32 and ints.min() >= -8 and ints.max() < 8
    assert flags.dtype == np.bool_ and flags.any() and not flags.all()
    assert unsigned.min() >= 0
    assert CUPY.poison_(ints).tolist() == [2**31 - 1] * 500
    assert CUPY.poison_(flags).all()
    with pytest.raises(ValueError, match="bfloat16"):
        CUPY.random_array((2,), "bfloat16", "randn", generator=gen, device="cuda")


def test_cupy_reference_and_check(fake_cupy):
    desc = load_description(SAXPY).at_shape({"n": 64})
    arrays = make_inputs(desc, seed=3, device="cuda", arrays=CUPY)
    (expected,) = reference_outputs(desc, arrays, CUPY)
    assert np.allclose(expected, 2.5 * arrays["x"] + arrays["y"])
    wrong = compare(arrays["out"], expected, rtol=1e-5, atol=1e-5, arrays=CUPY)
    assert not wrong.ok and "64 of 64" in wrong.message and "64 NaN" in wrong.message
    arrays["out"][:] = expected
    arrays["out"][5] += 1.0
    off = compare(arrays["out"], expected, rtol=1e-5, atol=1e-5, arrays=CUPY)
    assert not off.ok and "flat index 5" in off.message and math.isclose(off.max_abs_err, 1.0)
    arrays["out"][5] -= 1.0
    assert compare(arrays["out"], expected, rtol=1e-5, atol=1e-5, arrays=CUPY).ok


def test_an_expression_may_import_only_the_array_libraries():
    # CuPy's compiled routines import lazily through the evaluating frame's builtins.
    assert evaluate_expression("__import__('numpy').float64(2.0) * x", {"x": 3.0}) == 6.0
    with pytest.raises(ImportError, match="'os'"):
        evaluate_expression("__import__('os').getcwd()", {})
    with pytest.raises(NameError):
        evaluate_expression("open('x')", {})
