"""`ciq-tune tune --stages`: refused combinations (no Ray), the "controls added" line, and one
staged run end to end on a CPU (Triton's interpreter, in the session's shared Ray)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from ciq_tune.cli import main
from ciq_tune.validation import CandidateValidation
from ciq_tune.validation import SearchValidation
from ciq_tune.validation import ValidationConfig
from ciq_tune.validation.statistics import compare_samples
from searchers.kernel_search import SearchRun
from searchers.placement import plan_placement
from searchers.run.staged import controls_added
from searchers.staged import StagedRun
from tests.objectives.data.row_scale_description import row_scale_description

ROOT = Path(__file__).parents[1]
SPILL = ROOT / "examples/kernels/ptx/spill.yaml"
SOFTMAX = ROOT / "examples/kernels/triton/softmax.yaml"


def _row_scale(tmp_path: Path) -> Path:
    """The tiny Triton description (one parameter, one compiler control) at one size."""
    return row_scale_description(tmp_path, sizes={"rows": 4, "n_cols": 64})


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ([str(SOFTMAX), "--shapes", "all"], "`--stages` tunes one description"),
        ([str(SOFTMAX), str(SOFTMAX)], "`--stages` tunes one description"),
        ([str(SOFTMAX), "--search-timeout", "5"], "`--search-timeout` applies to campaigns"),
        ([str(SOFTMAX), "--benchmark", "per-gpu"], "use `--benchmark in-trial`"),
        ([str(SOFTMAX), "--budget", "1"], "needs `--budget` >= 2"),
        ([str(SOFTMAX)], "stage 2 of `--stages` has nothing to search; drop --stages"),
        ([str(SPILL)], "stage 1 of `--stages` has no kernel parameters"),
    ],
)
def test_stages_refuses_what_it_cannot_run_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], fragment: str
) -> None:
    assert main(["tune", *extra, "--stages", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ciq-tune: error:") and err.count("\n") == 1
    assert fragment in err
    assert not (tmp_path / "out").exists()  # refused before any output or Ray start


def test_resume_refuses_a_staged_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    settings = {"description": str(SOFTMAX), "stages": True}
    (tmp_path / "run.json").write_text(json.dumps(settings))
    assert main(["resume", str(tmp_path)]) == 2
    assert "a staged search (`tune --stages`) does not resume" in capsys.readouterr().err


def _staged(first: float, second: float) -> StagedRun:
    placement = plan_placement("triton", cluster_gpus=0, cluster_cpus=1, trials_per_gpu=1)
    one: dict[str, Any] = {"config": {"params": {"B": 1}}, "time_ms": first, "status": "ok"}
    two: dict[str, Any] = {
        "config": {"params": {"B": 1}, "controls": {"t": {"w": 8}}},
        "time_ms": second,
    }
    params = SearchRun(trials=[one], best=one, wall_s=1.0, placement=placement)
    controls = SearchRun(
        trials=[{**two, "status": "ok"}], best=two, wall_s=1.0, placement=placement
    )
    return StagedRun(params, controls, one["config"], two["config"])


def _validated(configs_and_speedups: list[tuple[dict[str, Any], float]]) -> SearchValidation:
    rng = np.random.default_rng(0)
    config = ValidationConfig(repetitions=20)
    candidates = []
    for rank, (cfg, speedup) in enumerate(configs_and_speedups, start=1):
        baseline = 1.0 + 0.01 * rng.standard_normal(20)
        candidate = baseline / speedup * (1.0 + 0.001 * rng.standard_normal(20))
        result = compare_samples(
            baseline.tolist(), candidate.tolist(), config=config, measurement="interleaved"
        )
        candidates.append(
            CandidateValidation(
                rank=rank, candidate_id=rank, config=cfg, search_values={}, result=result
            )
        )
    return SearchValidation(outcome="kept", reason="test", top_k=2, candidates=candidates)


def test_controls_added_labels_search_values_and_says_when_nothing_beyond_noise() -> None:
    staged = _staged(2.0, 1.6)
    assert staged.best_params is not None and staged.best is not None
    skipped = SearchValidation(outcome="skipped", reason="no GPU", top_k=3)
    line = controls_added(staged, skipped, "time_ms", "min")
    assert "= 1.2500 by the search's own values" in line
    assert "not re-measured" in line
    # Re-measured: the same speedup over the baseline for both stage winners is no gain.
    same = _validated([(staged.best_params, 1.10), (staged.best, 1.10)])
    line = controls_added(staged, same, "time_ms", "min")
    assert "re-measured against the same baseline: 1.0" in line
    assert line.endswith("nothing beyond noise")
    # Stage 2 re-measured 20 % faster than stage 1 (a clear gain within tight CIs).
    better = _validated([(staged.best_params, 1.0), (staged.best, 1.2)])
    line = controls_added(staged, better, "time_ms", "min")
    assert "re-measured against the same baseline: 1.2" in line and line.endswith("helped")


def test_controls_added_says_when_stage_two_did_not_run() -> None:
    staged = _staged(2.0, 1.6)
    staged.controls = None
    skipped = SearchValidation(outcome="skipped", reason="no GPU", top_k=3)
    assert "stage 2 did not run" in controls_added(staged, skipped, "time_ms", "min")


@pytest.mark.slow
def test_stages_runs_both_stages_and_writes_tunes_outputs(
    ray_cluster: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Triton's CPU interpreter (the isolated workers of trials without a GPU set it too).
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "out"
    command = ["tune", str(_row_scale(tmp_path)), "--stages", "--budget", "4", "--num-cpus", "2"]
    command += ["--tracking", "none", "--quiet", "--out", str(out)]
    status = main(command)
    stdout = capsys.readouterr().out
    assert status == 0, stdout
    with open(out / "evaluations.csv") as f:
        rows = list(csv.DictReader(f))
    # 70 % of 4 (floored) for the parameters, the rest for the controls on their best sets.
    assert [r["origin"] for r in rows] == ["stage1_params"] * 2 + ["stage2_controls"] * 2
    stage1 = [json.loads(r["config_json"]) for r in rows[:2]]
    assert all(set(c) == {"params"} for c in stage1)
    for row in rows[2:]:
        config = json.loads(row["config_json"])
        assert "controls" in config and {"params": config["params"]} in stage1
    assert all(r["status"] == "ok" for r in rows)
    # `tune`'s outputs: the controls file of the search's best (validation skipped on a CPU).
    data = yaml.safe_load((out / "row_scale.controls.yaml").read_text())
    assert json.loads((out / "validation.json").read_text())["outcome"] == "skipped"
    best = min(rows, key=lambda r: float(r["time_ms"]))
    assert data["params"] == json.loads(best["config_json"])["params"]
    run = json.loads((out / "run.json").read_text())
    assert run["stages"] is True and run["budget"] == 4
    assert run["description"] == str((tmp_path / "row_scale.yaml").resolve())
    assert "4 evaluations (4 ok)" in stdout
    assert "controls added: stage 2's best / stage 1's best = " in stdout
    assert "by the search's own values" in stdout and "not re-measured" in stdout
