"""`SearchResult`: CompileIQ's results table (one row per evaluation) with best and Pareto rows."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ciq_tune.compat.config import INVALID_SCORE
from ciq_tune.compat.config import MultiScoreComparison
from ciq_tune.errors import EngineError

SCORE_PREFIX = "score_"
NORM_PREFIX = "norm_score_"
COLUMNS = ("metadata", "generation", "params")


def is_invalid(value: Any) -> bool:
    """True for `INVALID_SCORE`, None, NaN, ±inf and anything that is not a number."""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, (int, float, np.number)):
        return not math.isfinite(float(value))
    return True


def score_columns(n: int) -> list[str]:
    """`score_1` … `score_n`, CompileIQ's column names (1-based)."""
    return [f"{SCORE_PREFIX}{i}" for i in range(1, n + 1)]


class SearchResult:
    """Every evaluation of a search: `metadata`, `generation`, `params`, `score_1` … `score_N`
    (`INVALID_SCORE` for a failed one) and, with normalization, `norm_score_1` … .

    Args:
        frame: the table (columns as above).
        problem_type: "min" or "max" for every objective, or a list with one per objective.
        objective_weights: weights used to pick the best point with several objectives.
    """

    def __init__(
        self,
        frame: pd.DataFrame,
        problem_type: str | Sequence[str] = "min",
        objective_weights: Sequence[float] | None = None,
    ) -> None:
        missing = [c for c in COLUMNS if c not in frame.columns]
        n = sum(1 for c in frame.columns if str(c).startswith(SCORE_PREFIX))
        if missing or n == 0:
            raise EngineError(
                f"a SearchResult table needs columns {list(COLUMNS)} and score_1..score_N, got "
                f"columns={list(frame.columns)}"
            )
        self.num_objectives = n
        modes = [problem_type] * n if isinstance(problem_type, str) else list(problem_type)
        if len(modes) != n or any(m not in ("min", "max") for m in modes):
            raise EngineError(
                f"`problem_type` must be 'min'/'max' or one of them per objective ({n}), got "
                f"problem_type={problem_type!r}"
            )
        weights = list(objective_weights) if objective_weights is not None else [1.0] * n
        if len(weights) != n:
            raise EngineError(
                f"`objective_weights` needs {n} values, got objective_weights={weights}"
            )
        self.modes = modes
        self.weights = weights
        self._frame = frame.reset_index(drop=True)

    # -- CompileIQ's API -----------------------------------------------------------------------
    def get_results(self) -> pd.DataFrame:
        """A copy of the whole table."""
        return self._frame.copy()

    def get_best_result(
        self, comparison: MultiScoreComparison | str = MultiScoreComparison.PARETO
    ) -> dict[str, Any] | None:
        """The best valid row as a dict (`metadata`, `generation`, `params`, `score_N`, …), or
        None when no evaluation succeeded. `comparison` matters with several objectives only."""
        comparison = MultiScoreComparison(comparison)
        valid = self._valid_index()
        if not valid:
            return None
        F = self._minimised(valid)
        if self.num_objectives == 1:
            best = valid[int(np.argmin(F[:, 0]))]
            return self._row(best)
        unit = _unit(F)
        weights = np.asarray(self.weights)
        average = unit @ weights / weights.sum()
        if comparison is MultiScoreComparison.AVERAGE:
            return self._row(valid[int(np.argmin(average))])
        front = _non_dominated(F)
        if comparison is MultiScoreComparison.PARETO:
            pick = min(front, key=lambda i: (average[i], i))
        else:
            pick = min(front, key=lambda i: (float(np.std(unit[i])), average[i], i))
        return self._row(valid[pick])

    def pareto_front(self) -> list[dict[str, Any]]:
        """The Pareto-efficient valid rows, in table order."""
        valid = self._valid_index()
        if not valid:
            return []
        front = _non_dominated(self._minimised(valid))
        return [self._row(valid[i]) for i in sorted(front)]

    calculate_pareto_front = pareto_front

    def clear_duplicates(self) -> SearchResult:
        """Keep one row per configuration (the first valid one, else the first)."""
        frame = self._frame.assign(
            _key=[json.dumps(p, sort_keys=True, default=str) for p in self._frame["params"]],
            _invalid=[self._row_invalid(i) for i in range(len(self._frame))],
        )
        frame = frame.sort_values(["_key", "_invalid"], kind="stable")
        kept = frame.drop_duplicates("_key").sort_index().drop(columns=["_key", "_invalid"])
        self._frame = kept.reset_index(drop=True)
        return self

    def save(self, path: str | Path) -> Path:
        """Write the table as CSV (`params` and `metadata` as JSON text)."""
        path = Path(path)
        frame = self._frame.copy()
        frame["params"] = [json.dumps(p, default=str) for p in frame["params"]]
        frame["metadata"] = [
            m if isinstance(m, str) else json.dumps(m, default=str) for m in frame["metadata"]
        ]
        frame.to_csv(path, index=False)
        return path

    @classmethod
    def from_csv(
        cls,
        path: str | Path,
        problem_type: str | Sequence[str] = "min",
        clear_duplicates: bool = False,
        objective_weights: Sequence[float] | None = None,
    ) -> SearchResult:
        """Read a table written by `save` (or by `Search(dump_results=...)`)."""
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        frame["params"] = [json.loads(p) for p in frame["params"]]
        frame["generation"] = frame["generation"].astype(int)
        for column in frame.columns:
            if str(column).startswith((SCORE_PREFIX, NORM_PREFIX)):
                frame[column] = [_score_from_text(v) for v in frame[column]]
        return cls.from_dataframe(frame, problem_type, clear_duplicates, objective_weights)

    @classmethod
    def from_dataframe(
        cls,
        frame: pd.DataFrame,
        problem_type: str | Sequence[str] = "min",
        clear_duplicates: bool = False,
        objective_weights: Sequence[float] | None = None,
    ) -> SearchResult:
        """Wrap an existing table (columns as in the class docstring)."""
        result = cls(frame.copy(), problem_type, objective_weights)
        return result.clear_duplicates() if clear_duplicates else result

    # -- helpers -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._frame)

    def __repr__(self) -> str:
        valid = len(self._valid_index())
        return f"SearchResult({len(self)} evaluations, {valid} valid)"

    def _row_invalid(self, i: int) -> bool:
        return any(is_invalid(self._frame.at[i, c]) for c in score_columns(self.num_objectives))

    def _valid_index(self) -> list[int]:
        return [i for i in range(len(self._frame)) if not self._row_invalid(i)]

    def _minimised(self, rows: Sequence[int]) -> np.ndarray:
        signs = np.array([1.0 if m == "min" else -1.0 for m in self.modes])
        values = self._frame.loc[list(rows), score_columns(self.num_objectives)]
        return values.to_numpy(dtype=float) * signs

    def _row(self, i: int) -> dict[str, Any]:
        return {k: _plain(v) for k, v in self._frame.iloc[i].to_dict().items()}


def _unit(F: np.ndarray) -> np.ndarray:
    low, high = F.min(axis=0), F.max(axis=0)
    return (F - low) / np.where(high > low, high - low, 1.0)


def _non_dominated(F: np.ndarray) -> list[int]:
    front = []
    for i in range(len(F)):
        dominated = np.any(np.all(F[i] >= F, axis=1) & np.any(F[i] > F, axis=1))
        if not dominated:
            front.append(i)
    return front


def _score_from_text(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return INVALID_SCORE
    return value if math.isfinite(value) else INVALID_SCORE


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
