"""`ciq_tune.capture` under Triton's interpreter: a small program's launches of a shipped kernel
(its own @triton.heuristics, strides between the pointers) recorded and written as a description
that loads and evaluates against the kernel as shipped, with the program's results unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ciq_tune.errors import DescriptionError
from ciq_tune.runtime.triton_kernel import KernelEntry
from objectives.capture import KernelLaunches
from objectives.capture import Tensor
from objectives.capture import describe
from tests.interpreted import run_interpreted

REPO = Path(__file__).resolve().parents[2]
KERNEL = REPO / "tests/objectives/data/rms_norm_shipped.py"

PROGRAM = """
import json, sys
import torch
import ciq_tune
from objectives.triton_entry import load_module
kernel = load_module(sys.argv[2]).rms_norm_heuristic

def rms_norm(x, w):  # a model's layer, as its project calls the kernel
    y = torch.empty_like(x)
    kernel[(x.shape[0],)](y, y.stride(0), x, x.stride(0), w, x.shape[1], 1e-6)
    return y

def model(tokens):
    torch.manual_seed(0)
    w = torch.randn(40)
    outs = [rms_norm(torch.randn(tokens, 40), w) for _ in range(3)]
    return outs + [rms_norm(torch.randn(2, 100), torch.randn(100))]

plain = model(5)
with ciq_tune.capture("rms_norm_heuristic", out=sys.argv[1]) as recorded:
    captured = model(5)
same = all(torch.equal(a, b) for a, b in zip(plain, captured))
json.dump({"same": same, "kernels": sorted(recorded.launches)}, sys.stdout)
"""


def test_a_programs_launches_become_a_description_that_tunes(tmp_path: Path) -> None:
    record = run_interpreted(PROGRAM, str(tmp_path), str(KERNEL))
    assert record == {"same": True, "kernels": ["rms_norm_heuristic"]}
    data = yaml.safe_load((tmp_path / "rms_norm_heuristic.yaml").read_text())
    # Two signatures: 3 launches at 5 x 40, 1 at 2 x 100.
    assert data["shapes"] == [
        {"Y_ptr_dim0": 5, "Y_ptr_dim1": 40, "weight": 3},
        {"Y_ptr_dim0": 2, "Y_ptr_dim1": 100, "weight": 1},
    ]
    assert data["arguments"] == {
        "Y_row_stride": "Y_ptr_dim1",
        "X_row_stride": "Y_ptr_dim1",
        "n_cols": "Y_ptr_dim1",
    }
    assert data["scalars"] == {"eps": 1e-6}
    assert [i["shape"] for i in data["inputs"]] == [
        ["Y_ptr_dim0", "Y_ptr_dim1"],
        ["Y_ptr_dim0", "Y_ptr_dim1"],
        ["Y_ptr_dim1"],
    ]
    assert data["outputs"] == ["Y_ptr"] and data["grid"] == "(Y_ptr_dim0,)"
    assert data["reference"] == "shipped"
    assert data["l2"] == "warm"  # timed as it ran in the program
    assert data["params"]["num_warps"]["default"] == 4
    # The description loads and evaluates at both shapes against the shipped kernel.
    evaluated = run_interpreted(
        """
        import json, sys
        from objectives import load_description, make_trainable
        desc = load_description(sys.argv[1])
        result = make_trainable(desc)({"params": {"num_warps": 2, "num_stages": 1}})
        json.dump({k: v for k, v in result.items() if isinstance(v, str)}, sys.stdout)
        """,
        str(tmp_path / "rms_norm_heuristic.yaml"),
    )
    assert evaluated["status"] == "ok", evaluated.get("error")
    assert evaluated["status@0"] == evaluated["status@1"] == "ok"


BLOCKED = REPO / "tests/objectives/data/blocked_scale.py"

BLOCKED_PROGRAM = """
import json, sys
import torch, triton
import ciq_tune
from objectives.triton_entry import load_module
kernel = load_module(sys.argv[2]).blocked_scale
with ciq_tune.capture("blocked_scale", out=sys.argv[1]):
    for rows, cols in ((4, 25), (10, 100)):
        x = torch.randn(rows, cols)
        y = torch.empty_like(x)
        n = x.numel()
        kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
json.dump({}, sys.stdout)
"""


def test_a_grid_of_the_autotuned_block_is_written_over_it(tmp_path: Path) -> None:
    run_interpreted(BLOCKED_PROGRAM, str(tmp_path), str(BLOCKED))
    data = yaml.safe_load((tmp_path / "blocked_scale.yaml").read_text())
    # The element count is the product of the sizes, and the grid its blocks.
    assert data["arguments"] == {"n": "x_ptr_dim0 * x_ptr_dim1"}
    assert data["grid"] == "(ceil(x_ptr_dim0 * x_ptr_dim1 / BLOCK),)"
    assert data["params"]["BLOCK"] == {"ordinal": [64], "default": 64}
    assert data["outputs"] == ["y_ptr"]
    evaluated = run_interpreted(
        """
        import json, sys
        from objectives import load_description, make_trainable
        result = make_trainable(load_description(sys.argv[1]))({"params": {"BLOCK": 64}})
        json.dump({k: v for k, v in result.items() if isinstance(v, str)}, sys.stdout)
        """,
        str(tmp_path / "blocked_scale.yaml"),
    )
    assert evaluated["status"] == "ok", evaluated.get("error")


SLICED_PROGRAM = """
import json, sys
import torch
import ciq_tune
from objectives.triton_entry import load_module
kernel = load_module(sys.argv[2]).rms_norm_heuristic
torch.manual_seed(0)
with ciq_tune.capture("rms_norm_heuristic", out=sys.argv[1]):
    for rows in (5, 3):
        wide = torch.randn(rows, 96)
        x = wide[:, 16:56]  # a slice: rows 96 apart, 40 long
        y = torch.empty(rows, 40)
        kernel[(rows,)](y, y.stride(0), x, x.stride(0), torch.randn(40), 40, 1e-6)
json.dump({}, sys.stdout)
"""


def test_a_sliced_input_is_described_with_its_strides_and_evaluates(tmp_path: Path) -> None:
    run_interpreted(SLICED_PROGRAM, str(tmp_path), str(KERNEL))
    data = yaml.safe_load((tmp_path / "rms_norm_heuristic.yaml").read_text())
    inputs = {i["name"]: i for i in data["inputs"]}
    assert inputs["X_ptr"]["strides"] == ["X_ptr_stride0", 1]
    assert "strides" not in inputs["Y_ptr"] and "strides" not in inputs["W_ptr"]
    assert data["arguments"]["X_row_stride"] == "X_ptr_stride0"
    assert [s["X_ptr_stride0"] for s in data["shapes"]] == [96, 96]
    evaluated = run_interpreted(
        """
        import json, sys
        from objectives import load_description, make_trainable
        from objectives._bench import make_inputs
        desc = load_description(sys.argv[1])
        x = make_inputs(desc.at_shape(desc.matrix()[0]), seed=1, device="cpu")["X_ptr"]
        result = make_trainable(desc)({"params": {"num_warps": 2, "num_stages": 1}})
        out = {k: v for k, v in result.items() if isinstance(v, str)}
        json.dump({**out, "x": [list(x.shape), list(x.stride())]}, sys.stdout)
        """,
        str(tmp_path / "rms_norm_heuristic.yaml"),
    )
    assert evaluated["x"] == [[5, 40], [96, 1]]  # made as the program launched it
    assert evaluated["status"] == "ok", evaluated.get("error")


def test_what_a_description_cannot_give_is_refused_with_the_argument() -> None:
    entry = KernelEntry(jit=None, parameters=("x_ptr", "y_ptr", "n", "flag"))

    def launches(x: Tensor, flag: object) -> KernelLaunches:
        values = {"x_ptr": x, "y_ptr": Tensor((8, 8), "float32", (8, 1)), "n": 64, "flag": flag}
        recorded = KernelLaunches(entry, "k.py", "k", outputs={"y_ptr"})
        recorded.signatures[("one",)] = (values, [({}, (8,))])
        recorded.counts[("one",)] = 1
        return recorded

    # A view keeps its layout: its strides, each a constant or a size.
    transposed = Tensor((8, 8), "float32", (1, 8))
    (x,) = [i for i in describe(launches(transposed, 1.0))["inputs"] if i["name"] == "x_ptr"]
    assert x["strides"] == [1, "x_ptr_dim0"]
    with pytest.raises(DescriptionError, match=r"`flag` was launched as None"):
        describe(launches(Tensor((8, 8), "float32", (8, 1)), None))
    # A length-1 dimension's stride does not matter.
    row = Tensor((1, 8), "float32", (1, 1))
    assert describe(launches(row, 1.0))["scalars"] == {"flag": 1.0}


def test_a_tiled_matmuls_grid_is_written_as_the_product_of_its_tiles() -> None:
    """The Triton tutorial's convention: ``cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)``
    programs, probed with each configuration of the kernel's own autotuner."""
    import triton

    from ciq_tune.runtime.triton_kernel import unwrap
    from examples.shipped import kernels
    from objectives.capture import _grid_probes

    entry = unwrap(kernels.matmul_kernel)
    recorded = KernelLaunches(entry, "kernels.py", "matmul_kernel", outputs={"c_ptr"})
    for i, (m, k, n) in enumerate([(128, 4096, 11008), (2048, 4096, 11008), (128, 11008, 4096)]):
        values: dict[str, object] = {
            "a_ptr": Tensor((m, k), "bfloat16", (k, 1)),
            "b_ptr": Tensor((k, n), "bfloat16", (n, 1)),
            "c_ptr": Tensor((m, n), "bfloat16", (n, 1)),
            **dict(M=m, N=n, K=k, stride_am=k, stride_ak=1, stride_bk=n, stride_bn=1),
            **dict(stride_cm=n, stride_cn=1),
        }

        def grid(meta: dict[str, int], m: int = m, n: int = n) -> tuple[int]:
            return (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)

        recorded.signatures[(i,)] = (values, _grid_probes(grid, values, entry))
        recorded.counts[(i,)] = 2 if i == 0 else 1
    data = describe(recorded)
    assert data["grid"] == "(ceil(a_ptr_dim0 / BLOCK_SIZE_M) * ceil(b_ptr_dim1 / BLOCK_SIZE_N),)"
    assert data["arguments"]["M"] == "a_ptr_dim0" and data["arguments"]["stride_am"] == "a_ptr_dim1"
    assert data["params"]["BLOCK_SIZE_M"] == {"ordinal": [32, 64, 128], "default": 128}
    assert [s["weight"] for s in data["shapes"]] == [2, 1, 1]
