"""Reports: a table in, PNGs and one self-contained HTML page out; importance finds the driver."""

from __future__ import annotations

import argparse
import base64
import builtins
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ciq_tune.cli.report import add_report_arguments
from ciq_tune.cli.report import parse_objective
from ciq_tune.cli.report import report_main
from ciq_tune.errors import ReportError
from ciq_tune.report import build_report
from ciq_tune.report import find_table
from ciq_tune.report import infer_objectives
from ciq_tune.report import load_evaluations
from ciq_tune.report import parameter_importance
from ciq_tune.report import pareto_mask
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.validation import validate_search
from tests.report.conftest import OBJECTIVES
from tests.report.conftest import synthetic_results
from tests.report.conftest import write_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_report_writes_pngs_and_a_self_contained_page(run_dir: Path) -> None:
    report = build_report(run_dir, objectives=OBJECTIVES)
    assert report.html == run_dir / "report" / "report.html"
    assert report.n_evaluations == 80
    assert 0 < report.n_ok < 80
    for png in (report.convergence, report.pareto, report.importance):
        assert png is not None
        assert png.read_bytes().startswith(PNG_MAGIC)
    page = report.html.read_text()
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(embedded) == 3
    assert base64.b64decode(embedded[0]) == report.convergence.read_bytes()
    # Nothing outside the page is referenced: it can be mailed or attached as it is.
    assert not re.search(r'(src|href)="(?!data:)', page)
    assert "compile_error" in page
    assert "timeout" in page


def test_best_and_front_in_the_page_match_the_search_results(run_dir: Path) -> None:
    results = synthetic_results()
    report = build_report(run_dir, objectives=OBJECTIVES)
    page = report.html.read_text()
    best = results.best(1)[0]
    assert f"{best.values['time_ms']:.6g}" in page
    front_ids = {r.candidate_id for r in results.pareto_front()}
    df = load_evaluations(run_dir / "evaluations.parquet")
    ok = df[df["status"] == "ok"].reset_index(drop=True)
    assert set(ok.loc[pareto_mask(ok, OBJECTIVES), "candidate_id"]) == front_ids
    assert f"Pareto front ({len(front_ids)})" in page


def test_pareto_respects_directions() -> None:
    ok = pd.DataFrame({"candidate_id": [0, 1, 2], "t": [1.0, 2.0, 3.0], "g": [1.0, 2.0, 3.0]})
    both_min = [Objective(name="t"), Objective(name="g")]
    assert pareto_mask(ok, both_min).tolist() == [True, False, False]
    min_max = [Objective(name="t"), Objective(name="g", mode="max")]
    assert pareto_mask(ok, min_max).tolist() == [True, True, True]


def test_three_objectives_and_csv(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run3", fmt="csv")
    df = pd.read_csv(run / "evaluations.csv")
    df["registers"] = 64 + 32 * (df["config/num_warps"] == 4)
    df.to_csv(run / "evaluations.csv", index=False)
    objectives = [*OBJECTIVES, Objective(name="registers")]
    report = build_report(run, tmp_path / "out", objectives=objectives)
    assert report.pareto == tmp_path / "out" / "pareto.png"
    assert report.pareto.read_bytes().startswith(PNG_MAGIC)


def test_importance_ranks_the_parameter_that_drives_time(table: pd.DataFrame) -> None:
    imp = parameter_importance(table, Objective(name="time_ms"), seed=0)
    assert imp.method == "permutation (random forest)"
    assert imp.parameters[0] == "tile/BM"
    assert imp.r2 is not None
    assert imp.r2 > 0.8
    # seed_pad has no effect on time: its importance is within noise of zero.
    pad = imp.parameters.index("seed_pad")
    assert abs(imp.scores[pad]) < 0.05 * imp.scores[0]


def test_importance_without_scikit_learn_uses_eta_squared(
    table: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_sklearn(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "sklearn" or name.startswith("sklearn."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    imp = parameter_importance(table, Objective(name="time_ms"))
    assert imp.method == "variance (eta squared)"
    assert imp.r2 is None
    assert imp.parameters[0] == "tile/BM"
    assert 0.8 < imp.scores[0] <= 1.0  # BM explains most of the variance of time
    assert imp.scores[imp.parameters.index("seed_pad")] < 0.2


def test_objectives_are_inferred_from_numeric_metric_columns(table: pd.DataFrame) -> None:
    assert [o.name for o in infer_objectives(table)] == ["time_ms", "energy_mj"]


def test_small_run_skips_importance_and_one_objective_skips_pareto(tmp_path: Path) -> None:
    run = write_run(tmp_path / "small", n=6)
    report = build_report(run, objectives=[Objective(name="time_ms")])
    assert report.pareto is None
    assert report.importance is None
    assert report.convergence.is_file()
    assert report.html.read_text().count("data:image/png") == 1


def test_bad_runs_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"evaluations\.parquet"):
        find_table(tmp_path)
    (tmp_path / "x.txt").write_text("a")
    with pytest.raises(ReportError, match=re.escape(".csv or .parquet")):
        load_evaluations(find_table(tmp_path / "x.txt"))
    pd.DataFrame({"candidate_id": [1]}).to_csv(tmp_path / "evaluations.csv", index=False)
    with pytest.raises(ReportError, match=re.escape("missing columns ['generation', 'status']")):
        load_evaluations(find_table(tmp_path))


def test_unknown_objective_is_named(run_dir: Path) -> None:
    with pytest.raises(ReportError, match=r"\['tflops'\]"):
        build_report(run_dir, objectives=[Objective(name="tflops", mode="max")])


def test_parse_objective() -> None:
    assert parse_objective("time_ms") == Objective(name="time_ms")
    assert parse_objective("tflops:max") == Objective(name="tflops", mode="max")
    with pytest.raises(ReportError, match="'t:fast'"):
        parse_objective("t:fast")


def test_report_main(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    args = parser.parse_args(
        [str(run_dir), "--out", str(tmp_path / "r"), "--objective", "time_ms:min"]
    )
    assert report_main(args) == 0
    assert str(tmp_path / "r" / "report.html") in capsys.readouterr().out
    assert not (tmp_path / "r" / "pareto.png").exists()
    assert np.isfinite(load_evaluations(run_dir / "evaluations.parquet")["time_ms"]).any()


def test_page_shows_the_validation_of_a_tune_run(run_dir: Path) -> None:
    assert build_report(run_dir, objectives=OBJECTIVES).validation is None
    results = synthetic_results()
    one = SearchResults(results.objectives[:1], results.records)  # validation ranks by time
    top = one.best(2)
    true = {top[0].candidate_id: 1.0, top[1].candidate_id: 1 / 1.05}
    rng = np.random.default_rng(0)

    def measure(config: Any) -> float:  # the search's best is noise, its second a real 5 %
        cid = next((r.candidate_id for r in top if r.config == config), -1)
        return true.get(cid, 1.0) * (1 + 0.025 * rng.normal())

    validation = validate_search(one, measure, {"tile": "compiler defaults"}, k=2)
    (run_dir / "validation.json").write_text(json.dumps(validation.to_dict()))
    report = build_report(run_dir, objectives=OBJECTIVES)
    assert report.validation == run_dir / "validation.json"
    page = report.html.read_text()
    assert "Validation against the baseline" in page
    assert f"kept: candidate {top[1].candidate_id} (search rank 2) KEPT" in page
    assert page.count("<td>KEPT</td>") == 1 and page.count("<td>REJECTED</td>") == 1
