"""Tests of kernel description files: defaults per kind, params → space, errors naming fields."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import ciq_tune.space as ss
from ciq_tune.errors import DescriptionError
from objectives.description import load_description


def _write(tmp_path: Path, text: str, name: str = "k.yaml") -> Path:
    (tmp_path / "kernel.ptx").write_text("// ptx\n")
    (tmp_path / "kernel.py").write_text("# triton\n")
    path = tmp_path / name
    path.write_text(text)
    return path


def test_minimal_ptx_description_gets_kind_defaults(tmp_path: Path) -> None:
    path = _write(tmp_path, "kind: ptx\nsource: kernel.ptx\n")
    desc = load_description(path)
    assert desc.name == "kernel"
    assert desc.metric == "spill_bytes" and desc.mode == "min"
    assert desc.arch == "sm_90"
    assert desc.source == (tmp_path / "kernel.ptx").resolve()
    assert set(desc.controls) == {"ptxas"}
    assert desc.controls["ptxas"].allow_numerics_changes is False


def test_json_description_and_source_hash(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps({"kind": "ptx", "source": "kernel.ptx"}), "k.json")
    desc = load_description(path)
    assert desc.source_sha256() == hashlib.sha256(b"// ptx\n").hexdigest()


FULL = """
name: matmul
kind: triton
source: kernel.py
entry: matmul_kernel
arch: sm_90a
params:
  BLOCK_M: {ordinal: [64, 128, 256]}
  num_warps: {choice: [4, 8]}
  x: {range: [1, 8, 1]}
  flag: {literal: "-x", knockout_prob: 0.5}
  lr: {uniform: [0.1, 1.0], log: true}
  split: {range: [2, 4], when: "BLOCK_M == 256"}
constraints: ["BLOCK_M * x <= 1024"]
controls:
  triton: {exclude: [num_ctas]}
sizes: {M: 256, N: 128}
inputs:
  - {name: a, shape: [M, N], dtype: float16}
  - {name: c, shape: [M, 4], init: ones}
outputs: [c]
grid: "(M // BLOCK_M, 1)"
reference: "mypkg.ref:matmul"
tolerance: {atol: 0.001}
timeouts: {compile_s: 10}
"""


def test_full_description_converts_params_to_space_primitives(tmp_path: Path) -> None:
    desc = load_description(_write(tmp_path, FULL))
    space = desc.param_space()
    assert space["BLOCK_M"] == ss.ordinal([64, 128, 256])
    assert space["num_warps"] == ss.choice([4, 8])
    assert space["x"] == ss.range(1, 8, 1)
    assert space["flag"] == ss.literal("-x", knockout_prob=0.5)
    assert space["lr"] == ss.uniform(0.1, 1.0, log=True)
    assert isinstance(space["split"], ss.Conditional)
    assert desc.metric == "time_ms"
    assert desc.shape_of(desc.inputs[0]) == (256, 128)
    assert desc.launch({"BLOCK_M": 64}) == {"grid": (4, 1)}
    assert desc.reference_is_callable
    assert desc.tolerance.atol == 0.001 and desc.tolerance.rtol == 0.01
    assert desc.timeouts.compile_s == 10


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("kind: ptx\nsource: missing.ptx\n", "source"),
        ("kind: ptx\nsource: kernel.ptx\narch: hopper\n", "arch"),
        ("kind: opencl\nsource: kernel.ptx\n", "kind"),
        ("kind: ptx\nsource: kernel.ptx\nparams: {a: {choise: [1]}}\n", "params.a"),
        ("kind: ptx\nsource: kernel.ptx\ncontrols: {gcc: {}}\n", "controls"),
        ("kind: ptx\nsource: kernel.ptx\nbogus: 1\n", "bogus"),
        ("kind: triton\nsource: kernel.py\n", "entry"),
        (
            "kind: ptx\nsource: kernel.ptx\ninputs: [{name: a, shape: [Q]}]\n",
            "'Q'",
        ),
        ("kind: ptx\nsource: kernel.ptx\ninputs: [{name: a, init: zeros}]\n", "init"),
        ("kind: ptx\nsource: kernel.ptx\ngrid: \"__import__('os')\"\n", "grid"),
        ("kind: ptx\nsource: kernel.ptx\noutputs: [z]\n", "outputs"),
        ("kind: ptx\nsource: kernel.ptx\nparams: {a: {choice: [1, 2], default: 3}}\n", "params.a"),
        ("kind: helion\nsource: kernel.py\nentry: matmul\n", "outputs"),
        (
            "kind: ptx\nsource: kernel.ptx\ninputs: [{name: a, shape: [4], strides: [1, 1]}]\n",
            "1 dimensions",
        ),
        (
            "kind: ptx\nsource: kernel.ptx\ninputs: [{name: a, shape: [4], strides: [S]}]\n",
            "'S'",
        ),
        (
            "kind: ptx\nsource: kernel.ptx\ninputs: [{name: a, shape: [4], strides: [0]}]\n"
            "outputs: [a]\n",
            "writes one address twice",
        ),
        ("kind: ptx\nsource: kernel.ptx\nl2: warm\n", "kind 'ptx' is not timed"),
        ("kind: ptx\nsource: kernel.ptx\nl2: hot\n", "l2"),
    ],
)
def test_bad_description_names_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(DescriptionError) as info:
        load_description(path)
    assert str(path) in str(info.value)
    assert field in str(info.value)


def test_param_default_is_the_space_default(tmp_path: Path) -> None:
    text = (
        "kind: ptx\nsource: kernel.ptx\nparams:\n"
        "  BM: {ordinal: [32, 64, 128], default: 64}\n"
        "  x: {range: [1, 8, 1], default: 3}\n"
        "  w: {choice: [4, 8]}\n"
    )
    space = ss.SearchSpace(load_description(_write(tmp_path, text)).param_space())
    assert space.decode(space.default_genes()) == {"BM": 64, "x": 3, "w": 4}


def test_unparsable_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(DescriptionError, match="cannot read"):
        load_description(tmp_path / "nope.yaml")
    with pytest.raises(DescriptionError, match="not valid"):
        load_description(_write(tmp_path, "kind: [ptx\n"))


def test_launch_rejects_non_positive_grid(tmp_path: Path) -> None:
    text = "kind: ptx\nsource: kernel.ptx\nsizes: {M: 8}\nparams: {B: {choice: [16]}}\n"
    desc = load_description(_write(tmp_path, text + "grid: M // B\n"))
    with pytest.raises(DescriptionError, match="positive int"):
        desc.launch({"B": 16})


@pytest.mark.parametrize(
    ("kind", "extra", "catalog"),
    [
        ("ptx", "", "nvcc"),
        ("cuda", "entry: k\n", "ptxas"),
        ("triton", "entry: k\n", "nvcc"),
        ("helion", "entry: k\noutputs: [x]\ninputs: [{name: x}]\n", "triton"),
    ],
)
def test_controls_of_another_compiler_are_an_error(
    tmp_path: Path, kind: str, extra: str, catalog: str
) -> None:
    source = "spill.ptx" if kind == "ptx" else ("k.cu" if kind == "cuda" else "k.py")
    (tmp_path / source).write_text("// kernel\n")
    path = _write(
        tmp_path, f"kind: {kind}\nsource: {source}\n{extra}controls: {{{catalog}: {{}}}}\n"
    )
    with pytest.raises(DescriptionError, match=rf"\['{catalog}'\] do not apply to kind '{kind}'"):
        load_description(path)


def test_a_strided_input_reaches_as_far_as_its_strides(tmp_path: Path) -> None:
    text = (
        "kind: ptx\nsource: kernel.ptx\nsizes: {M: 3, N: 4, LD: 10}\ninputs:\n"
        "  - {name: x, shape: [M, N], strides: [LD, 1]}\n"
        "  - {name: w, shape: [M, N], strides: [0, 1]}\n"
        "  - {name: y, shape: [M, N]}\n"
    )
    desc = load_description(_write(tmp_path, text))
    x, w, y = desc.inputs
    assert desc.strides_of(x) == (10, 1) and desc.strides_of(y) is None
    assert [desc.elements_of(i) for i in (x, w, y)] == [24, 4, 12]
