"""Two-stage evaluations: a benchmark worker that survives hangs and crashes, and the Triton
compile/benchmark split under the interpreter."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from objectives import make_trainable
from objectives._stages import BenchmarkRequest
from objectives._stages import benchmark_here
from objectives._stages import evaluate_in_stages
from objectives.description import load_description

HERE = Path(__file__).parent
TARGETS = "tests.objectives.isolate_targets"


def _staged(benchmark_target: str, payload: Any = None, run_timeout_s: float = 20.0):
    return evaluate_in_stages(
        compile_target=f"{TARGETS}:echo",
        benchmark_target=f"{TARGETS}:{benchmark_target}",
        payload=payload,
        compile_timeout_s=20.0,
        run_timeout_s=run_timeout_s,
        cpu_env={},
        preload=(),
        benchmark=benchmark_here,
    )


def test_the_benchmark_worker_stays_warm_between_candidates():
    first, second = _staged("echo", {"a": 1}), _staged("echo", {"a": 2})
    assert first["status"] == second["status"] == "ok"
    assert first["pid"] == second["pid"] and second["payload"] == {"a": 2}
    assert second["bench_spawn_s"] == 0.0 and second["gpu_wait_s"] >= 0.0
    assert second["wall_s"] >= second["bench_wall_s"] > 0


@pytest.mark.parametrize(("target", "status"), [("hang_run", "timeout"), ("segfault", "crash")])
def test_a_hung_or_crashing_kernel_kills_only_its_benchmark_worker(target, status):
    before = _staged("echo")
    failed = _staged(target, 60.0, run_timeout_s=1.0)
    assert failed["status"] == status, failed
    after = _staged("echo")
    assert after["status"] == "ok" and after["pid"] != before["pid"]
    assert after["bench_spawn_s"] > 0


def test_a_compile_failure_never_reaches_the_benchmark():
    calls: list[BenchmarkRequest] = []

    def benchmark(request: BenchmarkRequest) -> dict[str, Any]:
        calls.append(request)
        return benchmark_here(request)

    result = evaluate_in_stages(
        compile_target=f"{TARGETS}:raise_error",
        benchmark_target=f"{TARGETS}:echo",
        payload=None,
        compile_timeout_s=20.0,
        run_timeout_s=20.0,
        cpu_env={},
        preload=(),
        benchmark=benchmark,
    )
    assert result["status"] == "crash" and not calls


def _scale(tmp_path: Path, reference: str = "2.0 * x"):
    data = {
        "name": "scale",
        "kind": "triton",
        "source": str(HERE / "data/scale.py"),
        "entry": "scale_kernel",
        "sizes": {"n": 1000},
        "inputs": [{"name": "x", "shape": ["n"]}, {"name": "y", "shape": ["n"]}],
        "outputs": ["y"],
        "grid": "(ceil(n / BLOCK),)",
        "reference": reference,
        "tolerance": {"atol": 1e-6, "rtol": 1e-6},
        "params": {"BLOCK": {"ordinal": [128, 256]}},
    }
    path = tmp_path / "scale.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_description(path)


def test_triton_candidates_compile_in_the_trial_and_run_in_the_benchmark_worker(tmp_path):
    trainable = make_trainable(_scale(tmp_path), benchmark=benchmark_here)
    result = trainable({"params": {"BLOCK": 128}})
    assert result["status"] == "ok" and math.isfinite(result["time_ms"])
    assert result["timer"] == "host" and "compile_s" in result and "load_s" in result
    wrong = make_trainable(_scale(tmp_path, reference="3.0 * x"), benchmark=benchmark_here)(
        {"params": {"BLOCK": 256}}
    )
    assert wrong["status"] == "wrong_result" and math.isnan(wrong["time_ms"])


def test_only_staged_kinds_take_a_benchmarker():
    desc = load_description(HERE.parents[1] / "examples/kernels/ptx/spill.yaml")
    with pytest.raises(ValueError, match="`benchmark` needs a kind of"):
        make_trainable(desc, benchmark=benchmark_here)
