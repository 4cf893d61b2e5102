"""The suite's Triton kernels (persistent matmul, softmax, layer norm, attention) are correct.

Each runs through the Triton trainable at a small shape under the interpreter (no GPU), checked
against its PyTorch reference by the objective itself; GPU-marked tests do the same at the
descriptions' real sizes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ciq_tune.errors import DescriptionError
from objectives import make_search_space
from objectives import starting_points
from objectives.description import KernelDescription
from objectives.description import load_description
from objectives.triton import make_trainable

EXAMPLES = Path(__file__).parents[2] / "examples/kernels/triton"

# Small shapes: not multiples of the tiles where the kernel allows it (edges masked or clipped
# by the tensor descriptors), and fewer persistent programs than tiles.
SMALL_SIZES: dict[str, dict[str, int]] = {
    "matmul_persistent": {"M": 192, "N": 160, "K": 96, "NUM_SMS": 3},
    "softmax": {"M": 37, "N": 100, "BLOCK_N": 128, "NUM_SMS": 3},
    "layer_norm": {"M": 9, "N": 1500},
    # Attention needs N_CTX to be a multiple of BLOCK_M and BLOCK_N (a static assert).
    "attention": {"Z": 1, "H": 2, "N_CTX": 256, "HEAD_DIM": 64},
}


def _small(name: str, tmp_path: Path, **overrides: Any) -> KernelDescription:
    data = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    data["source"] = str(EXAMPLES / data["source"])
    data["sizes"] = SMALL_SIZES[name]
    data.update(overrides)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_description(path)


def _run(desc: KernelDescription, params: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = make_trainable(desc)({"params": params})
    return result


@pytest.mark.parametrize("name", sorted(SMALL_SIZES))
def test_every_starting_point_is_in_the_space(name):
    desc = load_description(EXAMPLES / f"{name}.yaml")
    space = make_search_space(desc)
    points = starting_points(desc, space)
    # The baseline plus each listed point, none dropped as a duplicate.
    assert len(points) == 1 + len(desc.starting_points)
    assert all(space.is_feasible(space.encode(p)) for p in points)


def test_starting_point_outside_the_space_is_named(tmp_path):
    desc = _small("softmax", tmp_path, starting_points=[{"params": {"num_warps": 3}}])
    with pytest.raises(DescriptionError, match=r"starting_points\[0\].*num_warps"):
        starting_points(desc, make_search_space(desc))


def test_starting_point_breaking_a_constraint_is_named(tmp_path):
    desc = _small("softmax", tmp_path, starting_points=[{"params": {"ROWS": 4, "num_warps": 2}}])
    with pytest.raises(DescriptionError, match=r"starting_points\[0\].*constraint"):
        starting_points(desc, make_search_space(desc))


MATMUL_CONFIGS = [
    # The description's default: 128 x 128 x 64 tiles, flattened loop.
    {},
    # Subtiled epilogue, ungrouped order.
    {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "EPILOGUE_SUBTILE": True},
    # Warp specialisation without flattening (the Hopper form).
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "FLATTEN": False, "WARP_SPECIALIZE": True},
]


@pytest.mark.parametrize("overrides", MATMUL_CONFIGS)
def test_persistent_matmul_under_interpreter(tmp_path, overrides):
    desc = _small("matmul_persistent", tmp_path)
    params = {**starting_points(desc, make_search_space(desc))[0]["params"], **overrides}
    result = _run(desc, params)
    assert result["status"] == "ok", result
    assert result["rel_err"] < 1e-3


@pytest.mark.parametrize(
    "params",
    [
        {"ROWS": 1, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 4, "num_warps": 8},
        # Four rows per step over 37 rows: the last step is partly masked.
        {"ROWS": 4, "PROGRAMS_PER_SM": 1, "LOOP_STAGES": 2, "num_warps": 8},
    ],
)
def test_softmax_under_interpreter(tmp_path, params):
    result = _run(_small("softmax", tmp_path), params)
    assert result["status"] == "ok", result
    assert result["rel_err"] < 1e-3


@pytest.mark.parametrize(
    "params",
    [
        # A row in registers (BLOCK_N >= N).
        {"BLOCK_N": 8192, "ROWS": 1, "num_warps": 8},
        # Three passes over 1024-wide chunks of the 1500 columns; 4 rows per program over 9.
        {"BLOCK_N": 1024, "ROWS": 4, "num_warps": 4},
    ],
)
def test_layer_norm_under_interpreter(tmp_path, params):
    result = _run(_small("layer_norm", tmp_path), params)
    assert result["status"] == "ok", result
    assert result["rel_err"] < 1e-2


@pytest.mark.parametrize(
    "params",
    [
        {"BLOCK_M": 128, "BLOCK_N": 64, "WARP_SPECIALIZE": False, "num_warps": 4},
        {"BLOCK_M": 64, "BLOCK_N": 128, "WARP_SPECIALIZE": True, "num_warps": 8},
    ],
)
def test_attention_under_interpreter(tmp_path, params):
    result = _run(_small("attention", tmp_path), {**params, "num_stages": 3})
    assert result["status"] == "ok", result
    assert result["rel_err"] < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(SMALL_SIZES))
def test_default_configuration_on_gpu_is_correct_and_timed(name):
    desc = load_description(EXAMPLES / f"{name}.yaml")
    baseline = starting_points(desc, make_search_space(desc))[0]
    result = make_trainable(desc)(baseline)
    assert result["status"] == "ok", result
    assert result["timer"] == "cuda_events" and result["time_ms"] > 0
    # The benchmark ran while this process held the GPU alone.
    assert result["gpu_s"] > 0 and result["gpu_wait_s"] >= 0
