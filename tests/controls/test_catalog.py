"""Tests of compiler-control catalogs: help parsing, version filtering, space, render, presets."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

import ciq_tune.space as ss
from ciq_tune.controls import detect_nvcc
from ciq_tune.controls import detect_ptxas
from ciq_tune.controls import detect_triton
from ciq_tune.controls.catalog import parse_help
from ciq_tune.errors import InvalidControl
from ciq_tune.errors import ToolchainError

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

HELP = """
--opt-level <N>                                     (-O)
        Specify optimization level.
        Default value:  3.

--register-usage-level <0..4>                       (-regUsageLevel)
        Narrower than the real range, to check that values are clipped to it.

--fmad <true|false>                                 (-fmad)
        Enables FMA.

--return-at-end                                     (-ret-end)
        Keep the last return.

--gpu-name <gpu name>                               (-arch)
        Allowed values for this option:  'compute_90','sm_80',
        'sm_90'.
        Default value:  'sm_75'.
"""


def _fake_ptxas(tmp_path: Path, help_text: str, release: str = "12.4, V12.4.99") -> Path:
    """A stand-in ptxas that prints a given help text and version."""
    (tmp_path / "help.txt").write_text(help_text)
    exe = tmp_path / "ptxas"
    exe.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release {release}";\n'
        f'else cat "{tmp_path / "help.txt"}"; fi\n'
    )
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_parse_help_reads_arguments_and_allowed_values() -> None:
    options = parse_help(HELP)
    assert options["--opt-level"].short == "-O"
    assert options["--fmad"].arg == "true|false"
    assert options["--return-at-end"].arg is None
    assert options["--gpu-name"].allowed == ("compute_90", "sm_80", "sm_90")


def test_catalog_offers_only_what_the_compiler_lists(tmp_path: Path) -> None:
    catalog = detect_ptxas(_fake_ptxas(tmp_path, HELP))
    assert catalog.version == "12.4.99"
    assert set(catalog.controls) == {"opt_level", "register_usage_level", "fmad", "return_at_end"}
    assert catalog.controls["register_usage_level"].values == (0, 1, 2, 3, 4)
    assert catalog.archs == ("sm_80", "sm_90")
    with pytest.raises(InvalidControl, match="maxrregcount"):
        catalog.render({"maxrregcount": 64})
    with pytest.raises(InvalidControl, match="register_usage_level=7"):
        catalog.render({"register_usage_level": 7})


def test_space_marks_knockout_and_filters_numerics(tmp_path: Path) -> None:
    catalog = detect_ptxas(_fake_ptxas(tmp_path, HELP))
    space = catalog.space()
    assert space["opt_level"] == ss.ordinal([0, 1, 2, 3], knockout_prob=0.5)
    assert space["fmad"] == ss.choice([True, False], knockout_prob=0.5)
    assert space["return_at_end"] == ss.literal(True, knockout_prob=0.5)
    assert "fmad" not in catalog.space(allow_numerics_changes=False)
    assert set(catalog.space(include=["opt_level", "fmad"], exclude=["fmad"])) == {"opt_level"}
    with pytest.raises(InvalidControl, match="'nope'"):
        catalog.space(include=["nope"])


def test_render_is_a_validated_argument_list(tmp_path: Path) -> None:
    catalog = detect_ptxas(_fake_ptxas(tmp_path, HELP))
    argv = catalog.render({"fmad": False, "opt_level": 2, "return_at_end": True})
    assert argv == ["--opt-level=2", "--fmad=false", "--return-at-end"]
    for hostile in (
        {"opt_level": "2; rm -rf /"},
        {"opt_level": 1.0},
        {"fmad": 0},
        {"output_file": "/etc/passwd"},
        {"return_at_end": "--output-file=/etc/passwd"},
    ):
        with pytest.raises(InvalidControl):
            catalog.render(hostile)


def test_vendor_controls_file_needs_apply_controls(tmp_path: Path) -> None:
    acf = tmp_path / "mine.acf"
    acf.write_bytes(b"\x00opaque")
    (tmp_path / "old").mkdir()
    old = _fake_ptxas(tmp_path / "old", HELP)
    with pytest.raises(InvalidControl, match="--apply-controls"):
        detect_ptxas(old, vendor_controls_files=[acf])
    newer = tmp_path / "new"
    newer.mkdir()
    exe = _fake_ptxas(newer, HELP + "\n--apply-controls    (-apply-controls)\n        File.\n")
    catalog = detect_ptxas(exe, vendor_controls_files=[acf])
    assert catalog.render({"apply_controls": str(acf.resolve())}) == [
        "--apply-controls",
        str(acf.resolve()),
    ]
    with pytest.raises(InvalidControl, match="apply_controls"):
        catalog.render({"apply_controls": "/etc/passwd"})


def test_presets_are_points_of_the_selected_space(tmp_path: Path) -> None:
    catalog = detect_ptxas(_fake_ptxas(tmp_path, HELP))
    presets = catalog.presets()
    assert presets["low-register-pressure"] == {"register_usage_level": 0}
    assert "bypass-l1-loads" not in presets  # -dlcm is not in this compiler's help
    assert "no-fma" not in catalog.presets(allow_numerics_changes=False)
    space = ss.SearchSpace(catalog.space())
    for preset in presets.values():
        space.encode(preset)


def test_missing_compiler_is_a_toolchain_error(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="path"):
        detect_ptxas(tmp_path / "nowhere")


@needs_ptxas
def test_installed_ptxas_catalog_has_the_issue_controls() -> None:
    catalog = detect_ptxas()
    for name in (
        "opt_level",
        "register_usage_level",
        "maxrregcount",
        "minnctapersm",
        "def_load_cache",
        "def_store_cache",
        "allow_expensive_optimizations",
        "fmad",
        "extensible_whole_program",
        "disable_optimizer_constants",
        "dont_merge_basicblocks",
        "return_at_end",
        "fast_compile",
    ):
        assert name in catalog.controls
    assert catalog.controls["fmad"].changes_numerics
    assert "sm_90" in catalog.archs


@needs_nvcc
def test_nvcc_forwards_ptxas_controls() -> None:
    catalog = detect_nvcc()
    assert catalog.controls["use_fast_math"].changes_numerics
    argv = catalog.render({"use_fast_math": True, "ptxas": {"opt_level": 2}})
    assert argv == ["--use_fast_math", "-Xptxas", "--opt-level=2"]
    space = catalog.space(include=["ftz", "ptxas/opt_level"])
    assert set(space) == {"ftz", "ptxas"} and set(space["ptxas"]) == {"opt_level"}
    assert "fmad" not in catalog.sub["ptxas"].controls  # nvcc's own --fmad drives it
    # Naming the sub-catalog as a whole (row_sum.yaml does) selects it for presets too.
    presets = catalog.presets(include=["extra_device_vectorization", "ptxas"])
    assert presets == {"vectorize": {"extra_device_vectorization": True}}


def test_triton_renders_launch_kwargs() -> None:
    pytest.importorskip("triton")
    catalog = detect_triton("sm_90")
    kwargs = catalog.render({"num_warps": 8, "ptx_options": {"opt_level": 2}})
    assert kwargs == {"num_warps": 8, "ptx_options": "--opt-level=2"}
    assert "num_ctas" not in detect_triton("sm_80").controls
    with pytest.raises(InvalidControl, match="num_warps"):
        catalog.render({"num_warps": 3})
