"""bench/gpu_suite.py on a CPU: its table, its arguments, and its steps under the interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from bench import gpu_suite

REPO = Path(__file__).resolve().parents[1]


def _comparison(speedup: float, low: float, high: float, verdict: str) -> dict[str, Any]:
    return {
        "speedup": speedup,
        "speedup_ci_low": low,
        "speedup_ci_high": high,
        "p_value": 1e-6,
        "cohens_d": 3.0,
        "verdict": verdict,
    }


def test_markdown_reports_every_variant_and_the_vendor_bound():
    suite = gpu_suite
    stats = {"median_ms": 0.2, "iqr_ms": 0.004, "rate": 687.0}
    record = {
        "kernel": "matmul",
        "sizes": {"M": 4096},
        "search": {
            "throughput": {
                "evaluations": 100,
                "wall_s": 40.0,
                "evals_per_s": 2.5,
                "concurrency": 6,
                "gpu_busy_fraction": 0.31,
                "mean_s": {
                    "compile_s": 1.1,
                    "gpu_s": 0.12,
                    "gpu_wait_s": 0.05,
                    "worker_spawn_s": 0.3,
                    "outside_trials": 0.4,
                },
            },
            "vs_compileiq": 2.5 / suite.COMPILEIQ_EVALS_PER_S,
            "nvml": {"gpus": {"00000000:c1:00.0": {"mean_pct": 35.0, "samples": 400}}},
            "statuses": {"ok": 97, "compile_error": 3},
        },
        "autotune": {"configs": 48, "wall_s": 70.0},
        "remeasure": {
            "unit": "TFLOP/s",
            "rounds": 50,
            "rep_ms": 25.0,
            "timer": "cuda_events",
            "skipped": {},
            "variants": {name: stats for name in ("default", "tuned", "autotune", "vendor")},
            "comparisons": {
                "tuned_vs_default": _comparison(1.12, 1.10, 1.14, "KEPT"),
                "tuned_vs_autotune": _comparison(1.01, 0.99, 1.02, "REJECTED"),
                "tuned_vs_vendor": _comparison(0.98, 0.975, 0.985, "REJECTED"),
            },
            "within_3pct_of_vendor": {
                "time_ratio": 1 / 0.98,
                "time_ratio_ci_high": 1 / 0.975,
                "holds": True,
            },
        },
    }
    text = suite.markdown(record, suite.KERNELS["matmul"])
    assert "**2.50 evals/s** (9.5x CompileIQ's 0.26)" in text
    assert "GPU busy 31 % (benchmark lock), NVML utilisation 35 %" in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 + 4  # header, separator and one row per variant
    assert "| default configuration | 0.2000 | 0.0040 | 687 | 1.120 [1.100, 1.140]" in text
    assert "| @triton.autotune, 48 configs, 70 s |" in text
    assert "within 3 %: **yes**" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "2"], "--rounds >= 3"),
        (["--skip", "search,tests"], "unknown steps ['tests']"),
    ],
)
def test_bad_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        gpu_suite.parse_args(["--kernel", "softmax", "--out", "/tmp/x", *argv])
    assert message in capsys.readouterr().err


def test_remeasure_checks_and_compares_every_variant_under_the_interpreter(tmp_path):
    # In a subprocess: the interpreter must be on before the kernel module is imported.
    script = textwrap.dedent(
        """
        import json, sys
        from bench import gpu_suite as suite
        kernel = suite.KERNELS["softmax"]
        desc = suite.load_kernel_description(kernel, dry_run=True)
        default = {"params": {"ROWS": 1, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 4,
                                "num_warps": 8}}
        tuned = {"params": {"ROWS": 2, "PROGRAMS_PER_SM": 1, "LOOP_STAGES": 2,
                              "num_warps": 8}}
        # A configuration whose grid cannot cover the rows: it must be refused, not timed.
        broken = {"params": {"ROWS": 1, "PROGRAMS_PER_SM": 1, "LOOP_STAGES": 1,
                               "num_warps": 2, "bogus": 1}}
        record = suite.run_remeasure(
            desc, kernel, {"default": default, "tuned": tuned, "broken": broken,
                            "vendor": None},
            rounds=3, warmup_rounds=0, device="cpu")
        json.dump(record, sys.stdout, default=str)
        """
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads(out.stdout.splitlines()[-1])
    assert set(record["variants"]) == {"default", "tuned", "vendor"}
    assert "bogus" in record["skipped"]["broken"]
    assert set(record["comparisons"]) == {"tuned_vs_default", "tuned_vs_vendor"}
    for stats in record["variants"].values():
        assert len(stats["samples_ms"]) == 3 and stats["median_ms"] > 0
    assert record["timer"] == "host" and "within_3pct_of_vendor" in record


def test_exhaustive_variants_are_the_recorded_best_in_the_descriptions_shape() -> None:
    from objectives import load_description

    tiled = load_description(REPO / "examples/kernels/triton/matmul.yaml")
    recorded = REPO / "docs/data/spaces/h200_matmul_fp16_4096.json.gz"
    variants = gpu_suite.exhaustive_variants(tiled, recorded, 2)
    assert list(variants) == ["exhaustive_1", "exhaustive_2"]
    best = variants["exhaustive_1"]
    # The tile is a parameter; num_warps and num_stages were recorded as Triton controls.
    assert set(best["params"]) == {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"}
    assert set(best["controls"]["triton"]) == {"num_warps", "num_stages"}
    assert variants["exhaustive_1"] != variants["exhaustive_2"]
