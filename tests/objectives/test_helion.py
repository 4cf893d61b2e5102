"""Tests of the Helion trainable: config spec → search space, interpreter correctness path,
failures as data, GPU timing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

pytest.importorskip("helion", reason="helion is not installed: pip install 'ciq-tune[helion]'")

from helion.autotuner.config_fragment import BlockSizeFragment
from helion.autotuner.config_fragment import BooleanFragment
from helion.autotuner.config_fragment import EnumFragment
from helion.autotuner.config_fragment import IntegerFragment
from helion.autotuner.config_fragment import ListOf
from helion.autotuner.config_fragment import NumThreadsFragment
from helion.autotuner.config_fragment import NumWarpsFragment
from helion.autotuner.config_fragment import PermutationFragment

from ciq_tune.errors import DescriptionError
from objectives import make_search_space
from objectives import starting_points
from objectives._bench import compare
from objectives._bench import make_inputs
from objectives._bench import reference_outputs
from objectives._helion_spec import flat_values
from objectives._helion_spec import slot_params
from objectives._helion_spec import split_params
from objectives._helion_worker import compile_ahead
from objectives._helion_worker import make_launch
from objectives.description import KernelDescription
from objectives.description import load_description
from objectives.helion import make_trainable

HERE = Path(__file__).parent
MATMUL = HERE.parents[1] / "examples/kernels/helion/matmul.yaml"

SLOTS = [
    ("block_sizes_0", BlockSizeFragment(16, 256, 32)),
    ("num_warps", NumWarpsFragment(1, 32, 4)),
    ("num_stages", IntegerFragment(1, 4, 1)),
    ("loop_orders_0", PermutationFragment(2)),
    ("pid_type", EnumFragment(("flat", "xyz"))),
    ("static_ranges_0", BooleanFragment()),
    ("indexing", ListOf(EnumFragment(("pointer", "block_ptr")), 2)),
    ("atomic_indexing", ListOf(EnumFragment(("pointer",)), 1)),
    ("range_flattens_0", EnumFragment((False, True, None))),
]
DEFAULTS = [64, 4, 1, [0, 1], "flat", False, ["pointer", "block_ptr"], ["pointer"], None]


def test_slot_params_convert_every_fragment_kind():
    assert slot_params(SLOTS, DEFAULTS) == {
        "block_sizes_0": {"ordinal": [16, 32, 64, 128, 256], "default": 64},
        "num_warps": {"ordinal": [1, 2, 4, 8, 16, 32], "default": 4},
        "num_stages": {"ordinal": [1, 2, 3, 4], "default": 1},
        "loop_orders_0": {"choice": [[0, 1], [1, 0]], "default": [0, 1]},
        "pid_type": {"choice": ["flat", "xyz"], "default": "flat"},
        "static_ranges_0": {"choice": [False, True], "default": False},
        # a list slot: one parameter per element
        "indexing_0": {"choice": ["pointer", "block_ptr"], "default": "pointer"},
        "indexing_1": {"choice": ["pointer", "block_ptr"], "default": "block_ptr"},
        # atomic_indexing_0 has one value: nothing to search
        # a None default cannot be declared: it becomes the first (default) choice
        "range_flattens_0": {"choice": [None, False, True]},
    }


def test_flat_values_fill_defaults_and_repack_lists():
    params = {"block_sizes_0": 128, "indexing_1": "pointer", "loop_orders_0": [1, 0]}
    assert flat_values(SLOTS, params, DEFAULTS) == [
        128,
        4,
        1,
        [1, 0],
        "flat",
        False,
        ["pointer", "pointer"],
        ["pointer"],
        None,
    ]
    with pytest.raises(ValueError, match="block_sizes_9"):
        flat_values(SLOTS, {"block_sizes_9": 16}, DEFAULTS)


def test_unknown_fragment_names_the_field():
    with pytest.raises(ValueError, match=r"num_threads_0.*NumThreadsFragment"):
        slot_params([("num_threads_0", NumThreadsFragment(64))], [0])


def test_split_params_nested_and_flat():
    assert split_params({"params": {"num_warps": 4}}) == {"num_warps": 4}
    assert split_params({"params/num_warps": 4, "controls": {}}) == {"num_warps": 4}
    with pytest.raises(ValueError, match="controls"):
        split_params({"params": {}, "controls": {"triton": {"num_warps": 4}}})


def test_compile_ahead_compiles_through_the_launcher_without_running():
    calls = []

    class FakeTritonKernel:
        def run(self, *args, grid, warmup, **kwargs):
            calls.append((args, grid, warmup, kwargs))
            return self

        def _init_handles(self):
            calls.append("loaded")

    def host(x, out, *, _launcher):  # Helion's generated host function, reduced
        _launcher(FakeTritonKernel(), (4,), x, out, num_warps=8, num_stages=3)

    compile_ahead(host, {"x": "X", "out": "OUT"})
    assert calls == [(("X", "OUT"), (4,), True, {"num_warps": 8, "num_stages": 3}), "loaded"]


def _description(tmp_path: Path, **overrides: object) -> KernelDescription:
    data = yaml.safe_load(MATMUL.read_text())
    data["source"] = str(MATMUL.parent / data["source"])
    # not multiples of the 16-wide default tiles: edges are masked
    data["sizes"] = {"M": 40, "N": 24, "K": 48}
    data.update(overrides)
    path = tmp_path / "mm.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_description(path)


def _scale(tmp_path: Path, entry: str) -> KernelDescription:
    return _description(
        tmp_path,
        name=f"scale_{entry}",
        source=str(HERE / "data/helion_scale.py"),
        entry=entry,
        sizes={"n": 100},
        inputs=[{"name": "x", "shape": ["n"]}, {"name": "out", "shape": ["n"]}],
        outputs=["out"],
        reference="2.0 * x",
        tolerance={"atol": 1e-6, "rtol": 1e-6},
        constraints=[],
    )


# Interpreter-safe settings for candidates: Triton's interpreter has no block pointers and
# Helion's persistent programs need a GPU's SM count.
CPU_SAFE = {f"indexing_{i}": "pointer" for i in range(3)} | {"pid_type": "flat"}


def test_matmul_space_is_derived_from_the_config_spec(tmp_path):
    desc = _description(tmp_path)
    space = make_search_space(desc)
    keys = set(space.keys)
    for key in ("block_sizes_0", "block_sizes_1", "block_sizes_2", "num_warps", "num_stages"):
        assert f"params/{key}" in keys
    # fixed by the kernel's autotune_config_overrides, as in Helion's own search
    assert not any(k.startswith("params/range_unroll_factors") for k in keys)
    values = {leaf.key: leaf.param.values for leaf in space.leaves}
    # bounds follow the shapes: tiles up to the next power of two of M=40, N=24, K=48
    assert max(values["params/block_sizes_0"]) == 64
    assert max(values["params/block_sizes_1"]) == 32
    assert values["params/num_warps"] == (1, 2, 4, 8, 16, 32)
    # the example's constraints name the derived parameters
    assert len(space.constraints) == 2
    baseline = starting_points(desc, space)[0]["params"]
    assert baseline["num_warps"] == 4 and baseline["pid_type"] == "flat"


def test_description_params_replace_derived_ones(tmp_path):
    desc = _description(tmp_path, params={"num_warps": {"choice": [2, 8], "default": 8}})
    space = make_search_space(desc)
    leaf = next(leaf for leaf in space.leaves if leaf.key == "params/num_warps")
    assert leaf.param.values == (2, 8)
    assert space.decode(space.default_genes())["params"]["num_warps"] == 8
    with pytest.raises(DescriptionError, match=r"BLOCK_M.*searchable"):
        make_search_space(_description(tmp_path, params={"BLOCK_M": {"choice": [64]}}))


def test_default_config_checks_and_times_under_interpreter(tmp_path):
    desc = _description(tmp_path)
    baseline = starting_points(desc, make_search_space(desc))[0]
    result = make_trainable(desc)(baseline)
    assert result["status"] == "ok", result
    assert result["timer"] == "host" and result["time_ms"] > 0 and result["compile_s"] > 0
    assert result["rel_err"] < 1e-3


def test_candidate_params_reach_the_helion_config(tmp_path):
    params = {"block_sizes_0": 32, "block_sizes_1": 16, "block_sizes_2": 32, "num_warps": 2}
    result = make_trainable(_description(tmp_path))({"params": {**params, **CPU_SAFE}})
    assert result["status"] == "ok", result
    config = json.loads(result["helion_config"])
    assert config["block_sizes"] == [32, 16, 32] and config["num_warps"] == 2
    assert config["range_unroll_factors"] == [0, 0]  # the kernel's override


def test_invalid_block_size_is_a_compile_error(tmp_path):
    result = make_trainable(_description(tmp_path))({"params": {"block_sizes_0": 24}})
    assert result["status"] == "compile_error" and "power of two" in result["error"]
    assert math.isnan(result["time_ms"])


def test_wrong_kernel_is_a_wrong_result(tmp_path):
    result = make_trainable(_scale(tmp_path, "scale_wrong"))({"params": {}})
    assert result["status"] == "wrong_result"
    assert "100 of 100" in result["error"]
    assert make_trainable(_scale(tmp_path, "scale"))({"params": {}})["status"] == "ok"


def test_plain_function_entry_is_a_compile_error_naming_the_decorator(tmp_path):
    result = make_trainable(_scale(tmp_path, "not_a_kernel"))({"params": {}})
    assert result["status"] == "compile_error" and "@helion.kernel" in result["error"]


def test_unknown_config_key_is_data_not_an_exception(tmp_path):
    result = make_trainable(_description(tmp_path))({"params": {}, "bogus": 1})
    assert result["status"] == "crash" and "bogus" in result["error"]


def test_make_trainable_rejects_other_kinds(tmp_path):
    desc = _description(tmp_path).model_copy(update={"kind": "triton"})
    with pytest.raises(ValueError, match="kind='triton'"):
        make_trainable(desc)


@pytest.mark.gpu
def test_matmul_example_default_config_on_gpu():
    desc = load_description(MATMUL)
    baseline = starting_points(desc, make_search_space(desc))[0]
    result = make_trainable(desc)(baseline)
    assert result["status"] == "ok", result
    assert result["timer"] == "cuda_events" and result["compile_s"] > 0
    # 2·4096³ FLOP at 3–1000 TFLOP/s: Helion's default on an H100 is 16×16×16 tiles, 1 stage
    assert 0.13 < result["time_ms"] < 50.0


@pytest.mark.gpu
def test_matmul_example_tuned_tiles_on_gpu():
    params = {"block_sizes_0": 128, "block_sizes_1": 128, "block_sizes_2": 64, "num_warps": 8}
    result = make_trainable(load_description(MATMUL))({"params": {**params, "num_stages": 3}})
    assert result["status"] == "ok", result
    assert 0.13 < result["time_ms"] < 3.0


@pytest.mark.gpu
def test_shared_memory_overflow_is_a_compile_error_on_gpu():
    params = {"block_sizes_0": 256, "block_sizes_1": 128, "block_sizes_2": 128, "num_warps": 8}
    result = make_trainable(load_description(MATMUL))({"params": {**params, "num_stages": 6}})
    assert result["status"] == "compile_error", result


@pytest.mark.gpu
def test_make_launch_runs_params_and_helion_configs_in_process():
    desc = load_description(MATMUL)
    configs = [
        {"params": {"block_sizes_0": 64, "block_sizes_1": 128, "block_sizes_2": 32}},
        {"helion_config": {"block_sizes": [128, 64, 32], "num_warps": 4, "num_stages": 3}},
    ]
    for config in configs:
        tensors = make_inputs(desc, seed=7, device="cuda")
        expected = reference_outputs(desc, tensors)[0]
        make_launch(desc, config)(tensors)
        check = compare(tensors["out"], expected, atol=0.5, rtol=0.01)
        assert check.ok, (config, check.message)
