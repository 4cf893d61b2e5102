"""SearchResult: best rows, comparisons, Pareto front, invalid scores, CSV round trip."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ciq_tune.compat import INVALID_SCORE
from ciq_tune.compat import MultiScoreComparison
from ciq_tune.compat import SearchResult
from ciq_tune.errors import EngineError


def _frame(scores: list[tuple]) -> pd.DataFrame:
    rows = []
    for i, row in enumerate(scores):
        record = {"metadata": "{}", "generation": i // 2, "params": {"x": i}}
        record.update({f"score_{j + 1}": s for j, s in enumerate(row)})
        rows.append(record)
    return pd.DataFrame(rows)


def test_single_objective_best_skips_invalid_scores_and_follows_problem_type() -> None:
    frame = _frame([(3.0,), (INVALID_SCORE,), (float("nan"),), (1.0,), (float("inf"),), (2.0,)])
    assert SearchResult(frame, "min").get_best_result()["params"] == {"x": 3}
    assert SearchResult(frame, "max").get_best_result()["params"] == {"x": 0}


def test_no_valid_row_gives_none_and_an_empty_front() -> None:
    result = SearchResult(_frame([(INVALID_SCORE,), (float("nan"),)]))
    assert result.get_best_result() is None
    assert result.pareto_front() == []


def test_pareto_front_and_the_three_comparisons() -> None:
    # (1, 9) and (9, 1) are extreme, (4, 4) balanced, (5, 5) dominated by (4, 4).
    result = SearchResult(_frame([(1.0, 9.0), (9.0, 1.0), (4.0, 4.0), (5.0, 5.0)]))
    front = [row["params"]["x"] for row in result.pareto_front()]
    assert front == [0, 1, 2]
    assert result.get_best_result(MultiScoreComparison.STDDEV)["params"] == {"x": 2}
    assert result.get_best_result("average")["params"] == {"x": 2}
    weighted = SearchResult(result.get_results(), "min", objective_weights=[10.0, 1.0])
    assert weighted.get_best_result(MultiScoreComparison.PARETO)["params"] == {"x": 0}


def test_mixed_directions_per_objective() -> None:
    result = SearchResult(_frame([(1.0, 1.0), (1.0, 5.0)]), ["min", "max"])
    assert [r["params"]["x"] for r in result.pareto_front()] == [1]


def test_csv_round_trip_keeps_invalid_scores_and_clears_duplicates(tmp_path: Path) -> None:
    frame = _frame([(2.0,), (INVALID_SCORE,)])
    frame.loc[len(frame)] = {"metadata": "{}", "generation": 1, "params": {"x": 1}, "score_1": 5}
    path = SearchResult(frame).save(tmp_path / "results.csv")
    loaded = SearchResult.from_csv(path, problem_type="min")
    assert loaded.get_results()["score_1"].tolist() == [2.0, INVALID_SCORE, 5.0]
    assert loaded.get_results()["params"].tolist() == [{"x": 0}, {"x": 1}, {"x": 1}]
    deduplicated = SearchResult.from_csv(path, clear_duplicates=True).get_results()
    assert deduplicated["score_1"].tolist() == [2.0, 5.0]


def test_a_table_without_scores_is_rejected() -> None:
    with pytest.raises(EngineError, match=r"score_1\.\.score_N"):
        SearchResult(pd.DataFrame({"metadata": [], "generation": [], "params": []}))
    with pytest.raises(EngineError, match="problem_type="):
        SearchResult(_frame([(1.0,)]), "best")
