"""bench/campaign_scaling.py on a CPU: the campaign it runs, the figures it derives, and one
whole run of a PTX campaign (its child process starts its own Ray)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import campaign_scaling as cs

ROOT = Path(__file__).resolve().parents[2]
SPILL = ROOT / "examples/kernels/ptx/spill.yaml"


def test_the_default_campaign_is_eight_searches_of_the_two_llm_matrices() -> None:
    args = cs.parse_args(["--out", "x"])
    searches = cs.campaign_searches(args)
    assert [s.description.name for s in searches] == ["matmul_llm.yaml", "matmul_llm_bf16.yaml"] * 4
    assert [s.seed for s in searches] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert {s.budget for s in searches} == {50} and len({s.name for s in searches}) == 8
    # As the CLI makes them: one search per shape of each matrix.
    per_shape = cs.campaign_searches(cs.parse_args(["--out", "x", "--shapes", "all"]))
    assert len(per_shape) == 24 and all(s.shape for s in per_shape)
    # The earlier rows' copies of one description.
    copies = cs.parse_args(["--out", "x", "--description", str(SPILL), "--searches", "3"])
    assert [(s.description, s.seed) for s in cs.campaign_searches(copies)] == [
        (SPILL, 0),
        (SPILL, 1),
        (SPILL, 2),
    ]


def _run(gpus: int, evals_per_min: float, after: float | None) -> dict[str, Any]:
    return {
        "mode": "per-gpu",
        "gpus": gpus,
        "cpus": 16 * gpus,
        "searches": 8,
        "shapes": 96,
        "evaluations": 400,
        "wall_s": 24000 / evals_per_min,
        "evals_per_min": evals_per_min,
        "first_result_s": 30.0,
        "busy_pct": [70.0] * gpus,
        "evals_per_min_after_first": after,
        "busy_pct_after_first": [80.0] * gpus,
    }


def test_efficiency_is_the_rate_over_k_times_the_one_gpu_rate() -> None:
    one, two = _run(1, 120.0, 150.0), _run(2, 216.0, 300.0)
    cs.with_efficiency([one, two], [])
    assert two["efficiency"] == pytest.approx(0.9) and two["efficiency_after_first"] == 1.0
    # The 1-GPU run of an earlier OUT.json, where this one ran on two GPUs only.
    alone = _run(2, 216.0, None)
    cs.with_efficiency([alone], [_run(1, 120.0, 150.0)])
    assert alone["efficiency"] == pytest.approx(0.9) and alone["efficiency_after_first"] is None
    text = cs.table([one, two])
    assert "| per-gpu | 2 | 32 | 8 | 96 | 400 | 111.1 | 216.0 | 30.0 | 70.0, 70.0 | 0.90 |" in text


@pytest.mark.ray
@pytest.mark.slow
def test_a_cpu_campaign_runs_from_its_command_to_its_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campaign"
    cs.main(
        [
            "--gpus", "0", "--modes", "auto", "--num-cpus", "2", "--descriptions", str(SPILL),
            "--searches", "2", "--evals", "3", "--out", str(out),
        ]
    )  # fmt: skip
    (run,) = json.loads(out.with_suffix(".json").read_text())["runs"]
    assert run["statuses"] == ["done", "done"] and run["evaluations"] == 6
    assert 0 < run["first_result_s"] < run["wall_s"]
    assert run["start"]["campaign_s"] < run["start"]["tune_runs_s"] < run["first_result_s"]
    assert "| auto | 0 | 2 | 2 | 2 | 6 |" in capsys.readouterr().out
