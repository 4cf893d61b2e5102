"""Tests of the PTX objective and the compile helpers it stands on (runs on a CPU with ptxas)."""

from __future__ import annotations

import math
import shutil
import stat
import time
from pathlib import Path

import pytest

from ciq_tune.controls import detect_ptxas
from ciq_tune.errors import BenchmarkTimeout
from objectives import load_description
from objectives import make_search_space
from objectives import starting_points
from objectives._compile import CompileCache
from objectives._compile import cache_key
from objectives._compile import parse_ptxas_verbose
from objectives._compile import run_compiler
from objectives.ptx import evaluate

EXAMPLE = Path(__file__).parents[2] / "examples/kernels/ptx/spill.yaml"
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")

LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k1' for 'sm_90'
ptxas info    : Function properties for k1
    472 bytes stack frame, 1020 bytes spill stores, 1032 bytes spill loads
ptxas info    : Used 64 registers, used 0 barriers, 472 bytes cumulative stack size
ptxas info    : Compiling entry function 'k2' for 'sm_90'
ptxas info    : Function properties for k2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers
"""


def test_parse_ptxas_verbose_per_function() -> None:
    stats = parse_ptxas_verbose(LOG)
    assert stats["k1"].registers == 64
    assert stats["k1"].spill_bytes == 2052
    assert stats["k1"].stack_bytes == 472
    assert stats["k2"].to_dict() == {
        "registers": 12,
        "spill_stores": 0,
        "spill_loads": 0,
        "stack_bytes": 0,
        "spill_bytes": 0,
    }


def test_run_compiler_kills_the_process_group_on_timeout(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    start = time.perf_counter()
    with pytest.raises(BenchmarkTimeout, match=r"timeout_s=0\.5"):
        run_compiler(["sh", "-c", f"(sleep 2; touch {marker}) & sleep 30"], timeout_s=0.5)
    assert time.perf_counter() - start < 5
    time.sleep(2.5)
    assert not marker.exists()  # the grandchild was killed with its group


def test_run_compiler_takes_an_argument_list_only() -> None:
    with pytest.raises(TypeError, match="argv"):
        run_compiler("echo hi", timeout_s=1)  # type: ignore[arg-type]
    assert run_compiler(["echo", "a;b"], timeout_s=5).log == "a;b\n"


def test_cache_key_and_cache_roundtrip(tmp_path: Path) -> None:
    base = cache_key("ab" * 32, ["--opt-level=1"], {"compiler": "ptxas", "version": "13.0.88"})
    assert base != cache_key("ab" * 32, ["--opt-level=2"], {"version": "13.0.88"})
    assert base != cache_key("ab" * 32, ["--opt-level=1"], {"compiler": "ptxas", "version": "13.5"})
    assert base != cache_key(
        "cd" * 32, ["--opt-level=1"], {"compiler": "ptxas", "version": "13.0.88"}
    )
    cache = CompileCache(tmp_path)
    assert cache.get(base) is None
    cache.put(base, {"spill_bytes": 3})
    assert cache.get(base) == {"spill_bytes": 3}
    with pytest.raises(ValueError, match="key"):
        cache.get("../../etc/passwd")


@needs_ptxas
def test_example_kernel_spills_by_default_and_less_at_lower_register_usage(tmp_path: Path) -> None:
    desc = load_description(EXAMPLE)
    cache = CompileCache(tmp_path)
    default = evaluate(desc, {"controls": {"ptxas": {}}}, cache=cache)
    assert default["status"] == "ok" and not default["cached"]
    # compile_s (what searchers.placement sums) is this call's ptxas time: 0 from the cache.
    assert default["compile_s"] == default["compile_time_s"] > 0
    assert default["spill_bytes"] > 0 and default["registers"] <= 64
    lean = evaluate(desc, {"controls": {"ptxas": {"register_usage_level": 0}}}, cache=cache)
    assert lean["spill_bytes"] < default["spill_bytes"]
    again = evaluate(desc, {"controls": {"ptxas": {}}}, cache=cache)
    assert again["cached"] and again["spill_bytes"] == default["spill_bytes"]
    assert again["compile_s"] == 0.0 and again["compile_time_s"] == default["compile_time_s"]


@needs_ptxas
def test_failures_are_reported_as_nan_with_a_status(tmp_path: Path) -> None:
    desc = load_description(EXAMPLE)
    bad = evaluate(desc, {"controls": {"ptxas": {"opt_level": "1 -o /etc/passwd"}}})
    assert bad["status"] == "invalid_control" and math.isnan(bad["spill_bytes"])
    (tmp_path / "broken.ptx").write_text(".version 8.0\n.target sm_90\nnot ptx\n")
    (tmp_path / "broken.yaml").write_text("kind: ptx\nsource: broken.ptx\n")
    broken = evaluate(load_description(tmp_path / "broken.yaml"), {})
    assert broken["status"] == "compile_error" and "error" in broken["error"].lower()
    assert math.isnan(broken["registers"])


def test_slow_compiler_reports_timeout(tmp_path: Path) -> None:
    desc = load_description(EXAMPLE).model_copy(
        update={
            "timeouts": load_description(EXAMPLE).timeouts.model_copy(update={"compile_s": 0.5})
        }
    )
    slow = tmp_path / "ptxas"
    slow.write_text(
        "#!/bin/sh\n"
        'case "$1" in --version) echo "Cuda compilation tools, release 13.0, V13.0.1";;\n'
        "--help) echo '--opt-level <N>   (-O)';; *) sleep 30;; esac\n"
    )
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    result = evaluate(desc, {"controls": {"ptxas": {"opt_level": 1}}}, catalog=detect_ptxas(slow))
    assert result["status"] == "timeout" and math.isnan(result["spill_bytes"])


@needs_ptxas
def test_search_space_and_starting_points_of_the_example() -> None:
    desc = load_description(EXAMPLE)
    space = make_search_space(desc)
    assert "controls/ptxas/opt_level" in space.keys
    assert "controls/ptxas/fmad" not in space.keys  # numerics-changing, not allowed by default
    points = starting_points(desc, space)
    assert points[0] == {"controls": {"ptxas": {}}}
    assert {"register_usage_level": 0} in [p["controls"]["ptxas"] for p in points]
    assert all("fmad" not in p["controls"]["ptxas"] for p in points)


@needs_ptxas
@pytest.mark.parametrize(
    "ptx", ["examples/kernels/ptx/spill.ptx", "tests/objectives/data/tiny.ptx"]
)
def test_sass_count_from_the_section_table_equals_the_disassemblers(ptx, tmp_path):
    from objectives._compile import count_sass_instructions
    from objectives._compile import find_disassembler
    from objectives._compile import sass_bytes

    if find_disassembler() is None:
        pytest.skip("needs cuobjdump or nvdisasm (CUDA toolkit or Triton's bundled copies)")
    cubin = tmp_path / "out.cubin"
    source = Path(__file__).parents[2] / ptx
    argv = ["ptxas", "-arch=sm_90", f"--output-file={cubin}", str(source)]
    run = run_compiler(argv, timeout_s=60)
    assert run.returncode == 0, run.log
    disassembled = count_sass_instructions(cubin)  # no arch: the disassembler counts
    assert disassembled is not None and disassembled > 0
    assert count_sass_instructions(cubin, arch="sm_90") == disassembled
    assert sass_bytes(cubin.read_bytes()) == 16 * disassembled
    assert sass_bytes(source.read_bytes()) is None  # not a cubin
