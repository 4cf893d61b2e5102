"""End to end on a CPU (Triton's interpreter): a three-shape description tunes in one search, each
evaluation at every shape, and `ciq_tune.runtime` returns each shape's configuration from the
controls file."""

from __future__ import annotations

import csv
import dataclasses
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from ciq_tune.cli import main
from ciq_tune.runtime import load
from searchers.run import matrix as run_matrix
from tests.objectives.data.row_scale_description import row_scale_description
from tests.searchers.sigint import SigintAtFirstResult
from tests.searchers.sigint import interrupted_tune

SHAPES = [
    {"rows": 2, "n_cols": 16},
    {"rows": 4, "n_cols": 64, "weight": 2},
    {"rows": 2, "n_cols": 256},
]


def _description(tmp_path: Path, **overrides: object) -> Path:
    return row_scale_description(tmp_path, **{"shapes": SHAPES, **overrides})


@pytest.mark.slow
def test_three_shapes_tune_in_one_search_and_load_per_shape(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "out"
    args = ["--budget", "4", "--num-cpus", "2", "--tracking", "none"]
    status = main(
        ["tune", str(_description(tmp_path)), *args, "--validate-top", "0", "--out", str(out)]
    )
    assert status == 0
    path = out / "row_scale.controls.yaml"
    data = yaml.safe_load(path.read_text())
    assert data["schema_version"] == 2
    matrix = data["matrix"]
    assert matrix["selection"]["mode"] == "per_shape"
    assert sorted(matrix["selection"]["key"]) == ["n_cols", "rows"]
    assert [e["shapes"][0]["sizes"] for e in matrix["entries"]] == [
        {k: v for k, v in s.items() if k != "weight"} for s in SHAPES
    ]
    assert [e["shapes"][0]["weight"] for e in matrix["entries"]] == [1.0, 2.0, 1.0]
    # One search of 4 evaluations, each at the three shapes: every bucket chose from all 4.
    assert [e["evaluations"] for e in matrix["entries"]] == [4, 4, 4]
    with (out / "evaluations.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    for entry_index, entry in enumerate(matrix["entries"]):
        column = [float(r[f"time_ms@{entry_index}"]) for r in rows if r["status"] == "ok"]
        assert entry["shapes"][0]["baseline"] > 0
        # Each bucket's winner is the fastest evaluation at its shape.
        assert entry["shapes"][0]["best"] == pytest.approx(min(column))
    tuned = load(path)
    for entry in matrix["entries"]:
        sizes = entry["shapes"][0]["sizes"]
        assert tuned.config_for(sizes) == {"params": entry["params"], "controls": entry["controls"]}
        assert tuned.kwargs_for(sizes)["BLOCK"] == entry["params"]["BLOCK"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nearest = tuned.config_for({"rows": 4, "n_cols": 60})
        tuned.config_for({"rows": 4, "n_cols": 60})
    assert nearest == tuned.config_for({"rows": 4, "n_cols": 64})
    assert len(caught) == 1 and "not tuned" in str(caught[0].message)
    assert (
        main(
            ["check", str(path), "--description", str(tmp_path / "row_scale.yaml"), "--ignore-gpu"]
        )
        == 0
    )


@pytest.mark.slow
def test_a_space_no_larger_than_the_budget_is_enumerated_once(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    # BLOCK (3 values) x num_warps (the catalog's values): fewer than the budget of 40.
    out = tmp_path / "out"
    args = ["--budget", "40", "--num-cpus", "2", "--tracking", "none", "--validate-top", "0"]
    assert main(["tune", str(_description(tmp_path)), *args, "--out", str(out)]) == 0
    with (out / "evaluations.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    configs = [r["config_json"] for r in rows]
    assert len(configs) == len(set(configs)) < 40
    blocks = {r["config/params/BLOCK"] for r in rows}
    warps = {r.get("config/controls/triton/num_warps", "") for r in rows}
    assert len(configs) == len(blocks) * len(warps)


@pytest.mark.slow
def test_one_configuration_for_the_matrix_is_validated_on_every_shape(
    ray_cluster: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    shapes = [{"rows": 2, "n_cols": 16}, {"rows": 2, "n_cols": 64, "weight": 3}]
    # The interpreter's host timings are noisy: a generous guard keeps candidates in play.
    selection = {"mode": "one", "worst_shape_limit": 5.0}
    description = _description(tmp_path, shapes=shapes, selection=selection)
    out = tmp_path / "out"
    args = ["--budget", "3", "--num-cpus", "2", "--tracking", "none", "--out", str(out)]
    validate = ["--validate-top", "1", "--validate-repetitions", "5"]
    assert main(["tune", str(description), *args, *validate]) == 0
    data = yaml.safe_load((out / "row_scale.controls.yaml").read_text())
    matrix = data["matrix"]
    assert matrix["selection"]["mode"] == "one" and matrix["selection"]["key"] == []
    (entry,) = matrix["entries"]
    assert [s["weight"] for s in entry["shapes"]] == [1.0, 3.0]
    assert all(s["baseline"] > 0 and s["best"] > 0 for s in entry["shapes"])
    # The bucket's candidates were ranked by the relative geomean and the best re-measured
    # against the baseline on both shapes.
    assert entry["validation"]["outcome"] in ("kept", "baseline")
    assert entry["validation"]["candidates"][0]["baseline"]["n"] == 5
    # where the validation's time went: its rounds (warm-up included, both shapes) and the rest
    assert re.search(
        r"validation of 1 buckets: \d+ rounds in [\d.]+ s of the", capsys.readouterr().out
    )
    tuned = load(out / "row_scale.controls.yaml")
    assert tuned.config_for({"rows": 9, "n_cols": 999}) == {
        "params": entry["params"],
        "controls": entry["controls"],
    }


@pytest.mark.slow
def test_ctrl_c_keeps_the_matrix_searchs_evaluations_and_exits_130(
    ray_cluster: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    # 125 configurations, so the search is still running at its first result.
    wide = {
        "params": {"BLOCK": {"ordinal": [8, 16, 32, 64, 128]}},
        "controls": {"triton": {"include": ["num_warps", "num_stages"]}},
    }
    description = _description(tmp_path, **wide)
    out = tmp_path / "out"
    args = ["--budget", "60", "--num-cpus", "2", "--tracking", "none", "--out", str(out)]
    args += ["--runtime", "ray"]
    # Ctrl+C as the first trial completes (Tune's own files show up late).
    sigint = SigintAtFirstResult()
    run_config = run_matrix._run_config

    def with_sigint(*given: Any) -> Any:
        config = run_config(*given)
        return dataclasses.replace(config, callbacks=[*(config.callbacks or []), sigint])

    monkeypatch.setattr(run_matrix, "_run_config", with_sigint)
    assert main(["tune", str(description), *args]) == 130
    assert sigint.sent
    printed = capsys.readouterr().out
    kept = re.search(
        r"interrupted: (\d+) evaluations .*evaluations.csv \(no controls file\)", printed
    )
    assert kept is not None, printed
    assert "a multi-shape search on Ray does not resume" in printed
    with (out / "evaluations.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert 0 < int(kept.group(1)) == len(rows) < 60
    assert all(f"time_ms@{i}" in rows[0] for i in range(3))
    assert not (out / "row_scale.controls.yaml").exists()  # no winner from a partial search
    assert main(["resume", str(out)]) == 2
    assert "a multi-shape search (`shapes`" in capsys.readouterr().err


@pytest.mark.slow
def test_an_interrupted_local_matrix_search_resumes_to_its_budget_with_every_shapes_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "out"
    budget = 6
    arguments = [str(_description(tmp_path)), "--budget", str(budget), "--num-cpus", "2"]
    arguments += ["--tracking", "none", "--runtime", "local", "--validate-top", "0"]
    returncode, stdout, stderr = interrupted_tune([*arguments, "--out", str(out)], budget, tmp_path)
    assert returncode == 130, stdout + stderr
    assert f"continue with `ciq-tune resume {out}`" in stdout
    with (out / "evaluations.csv").open() as handle:
        before = list(csv.DictReader(handle))
    assert 0 < len(before) < budget

    assert main(["resume", str(out)]) == 0
    printed = capsys.readouterr()
    # The resumed run's throughput counts its own evaluations, not the earlier ones; its
    # progress line counts on from them (the first result always prints one).
    assert f"{budget - len(before)} evaluations in " in printed.out
    assert f"\n{len(before) + 1}/{budget} evaluations, best " in "\n" + printed.err
    with (out / "evaluations.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == budget == len({r["config_json"] for r in rows})
    # The evaluations from before the interrupt kept their values at every shape.
    values = {r["config_json"]: [r[f"time_ms@{i}"] for i in range(len(SHAPES))] for r in rows}
    for row in before:
        assert values[row["config_json"]] == [row[f"time_ms@{i}"] for i in range(len(SHAPES))]
        if row["status"] == "ok":
            assert all(float(v) > 0 for v in values[row["config_json"]])
    matrix = yaml.safe_load((out / "row_scale.controls.yaml").read_text())["matrix"]
    assert [e["evaluations"] for e in matrix["entries"]] == [budget] * len(SHAPES)
