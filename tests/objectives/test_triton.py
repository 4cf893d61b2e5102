"""Tests of the Triton trainable: interpreter correctness path, failures as data, GPU timing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from objectives._bench import split_config
from objectives.description import load_description
from objectives.triton import make_trainable

HERE = Path(__file__).parent
MATMUL = HERE.parents[1] / "examples/kernels/triton/matmul.yaml"


def _scale(tmp_path: Path, **overrides: object):
    data = {
        "name": "scale",
        "kind": "triton",
        "source": str(HERE / "data/scale.py"),
        "entry": "scale_kernel",
        "sizes": {"n": 1000},
        "inputs": [{"name": "x", "shape": ["n"]}, {"name": "y", "shape": ["n"]}],
        "outputs": ["y"],
        "grid": "(ceil(n / BLOCK),)",
        "reference": "2.0 * x",
        "tolerance": {"atol": 1e-6, "rtol": 1e-6},
        "params": {"BLOCK": {"ordinal": [128, 256]}},
        "controls": {"triton": {"include": ["num_warps"]}},
        **overrides,
    }
    path = tmp_path / "scale.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_description(path)


def _small_matmul(tmp_path: Path):
    data = yaml.safe_load(MATMUL.read_text())
    data["source"] = str(MATMUL.parent / data["source"])
    data["sizes"] = {"M": 96, "N": 80, "K": 112}  # not multiples of the tiles: edges masked
    path = tmp_path / "mm.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_description(path)


def test_split_config_nested_and_flat(tmp_path):
    desc = _scale(tmp_path)
    nested = split_config(
        desc, {"params": {"BLOCK": 128}, "controls": {"triton": {"num_warps": 4}}}
    )
    flat = split_config(desc, {"params/BLOCK": 128, "controls/triton/num_warps": 4})
    assert nested == flat == ({"BLOCK": 128}, {"triton": {"num_warps": 4}})
    assert split_config(desc, {"params": {"BLOCK": 256}}) == ({"BLOCK": 256}, {"triton": {}})
    with pytest.raises(ValueError, match="controls/nvcc"):
        split_config(desc, {"params": {"BLOCK": 128}, "controls": {"nvcc": {}}})
    with pytest.raises(ValueError, match="params/BM"):
        split_config(desc, {"params": {"BM": 128}})


def test_interpreter_checks_a_correct_kernel(tmp_path):
    result = make_trainable(_scale(tmp_path))(
        {"params": {"BLOCK": 128}, "controls": {"triton": {"num_warps": 2}}}
    )
    assert result["status"] == "ok", result
    assert result["timer"] == "host" and result["time_ms"] > 0 and result["n"] == 3
    assert result["max_abs_err"] == 0.0


def test_interpreter_flags_unwritten_output(tmp_path):
    desc = _scale(tmp_path, entry="scale_skips_tail", reference="scale:twice")
    result = make_trainable(desc)({"params": {"BLOCK": 256}})
    assert result["status"] == "wrong_result"
    assert math.isnan(result["time_ms"])
    # 1000 elements in blocks of 256: the last program owns 232 of them
    assert "232 of 1000" in result["error"] and "232 NaN" in result["error"]


def test_module_reference(tmp_path):
    desc = _scale(tmp_path, reference="scale:twice")
    assert make_trainable(desc)({"params": {"BLOCK": 256}})["status"] == "ok"


def test_bad_control_is_a_compile_error(tmp_path):
    result = make_trainable(_scale(tmp_path))(
        {"params": {"BLOCK": 128}, "controls": {"triton": {"num_warps": 3}}}
    )
    assert result["status"] == "compile_error" and "num_warps=3" in result["error"]
    assert math.isnan(result["time_ms"])


def test_unknown_config_key_is_data_not_an_exception(tmp_path):
    result = make_trainable(_scale(tmp_path))({"params": {"BLOCK": 128}, "bogus": 1})
    assert result["status"] == "crash" and "bogus" in result["error"]


def test_matmul_example_under_interpreter(tmp_path):
    trainable = make_trainable(_small_matmul(tmp_path))
    config = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 4}
    result = trainable(
        {"params": config, "controls": {"triton": {"num_warps": 4, "num_stages": 3}}}
    )
    assert result["status"] == "ok", result
    assert result["rel_err"] < 1e-3


def test_make_trainable_rejects_other_kinds(tmp_path):
    desc = _scale(tmp_path).model_copy(update={"kind": "cuda"})
    with pytest.raises(ValueError, match="kind='cuda'"):
        make_trainable(desc)


@pytest.mark.gpu
def test_matmul_example_on_gpu_compiles_checks_and_times():
    trainable = make_trainable(load_description(MATMUL))
    config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}
    result = trainable(
        {"params": config, "controls": {"triton": {"num_warps": 4, "num_stages": 3}}}
    )
    assert result["status"] == "ok", result
    assert result["timer"] == "cuda_events" and result["n_regs"] > 0
    # 2·4096³ FLOP at 50–1000 TFLOP/s
    assert 0.13 < result["time_ms"] < 3.0


@pytest.mark.gpu
def test_shared_memory_overflow_is_a_compile_error():
    trainable = make_trainable(load_description(MATMUL))
    config = {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}
    result = trainable(
        {"params": config, "controls": {"triton": {"num_warps": 8, "num_stages": 6}}}
    )
    assert result["status"] == "compile_error", result
