"""Evaluation records and search results: best configuration, Pareto front, tables."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Literal

import numpy as np
from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

from ciq_tune.errors import EngineError
from ciq_tune.errors import ReportError

if TYPE_CHECKING:
    import pandas as pd

OK = "ok"
"""Status of a successful evaluation; any other status is a failure reason."""


def non_dominated(F: np.ndarray) -> np.ndarray:
    """True for the rows of `F` (evaluations × objectives, all minimised) that no other row
    dominates; equal rows do not dominate each other. pymoo's non-dominated sorting.

    Args:
        F: objective values, each turned into a minimum (`Objective.sign` times the value).
    """
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

    F = np.asarray(F, dtype=float)
    mask = np.zeros(len(F), dtype=bool)
    if len(F):
        mask[NonDominatedSorting().do(F, only_non_dominated_front=True)] = True
    return mask


class Objective(BaseModel):
    """One objective: a metric name, its direction and its weight when several are combined."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    mode: Literal["min", "max"] = "min"
    weight: float = Field(default=1.0, gt=0)

    @property
    def sign(self) -> float:
        """+1 for "min", -1 for "max": multiplying by it turns every objective into a minimum."""
        return 1.0 if self.mode == "min" else -1.0


@dataclass(frozen=True)
class EvaluationRecord:
    """One evaluated candidate: its configuration, status and objective values."""

    candidate_id: int
    generation: int
    config: Any
    genes: tuple[Any, ...]
    key: str
    origin: str
    status: str
    values: dict[str, float] | None
    elapsed_s: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == OK

    def minimised(self, objectives: Sequence[Objective]) -> np.ndarray:
        """Objective values signed so that lower is better for every objective."""
        if self.values is None:
            raise EngineError(f"candidate {self.candidate_id} failed ({self.status}): no values")
        return np.array([o.sign * self.values[o.name] for o in objectives])

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate_id": self.candidate_id,
            "generation": self.generation,
            "config": self.config,
            "genes": list(self.genes),
            "key": self.key,
            "origin": self.origin,
            "status": self.status,
            "values": self.values,
            "elapsed_s": self.elapsed_s,
            "info": _json_safe_info(self.info),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvaluationRecord:
        return cls(**{**data, "genes": tuple(data["genes"])})


class SearchResults:
    """All evaluations of a search, with the best configuration and the Pareto front.

    Args:
        objectives: the search's objectives (directions and weights).
        records: every evaluation, failed ones included, in the order they were told.
    """

    def __init__(self, objectives: Sequence[Objective], records: Sequence[EvaluationRecord]):
        self.objectives = list(objectives)
        self.records = list(records)

    @property
    def ok_records(self) -> list[EvaluationRecord]:
        return [r for r in self.records if r.ok]

    def best(self, k: int = 1) -> list[EvaluationRecord]:
        """The `k` best successful evaluations. With several objectives, the Pareto front is
        ordered by the weighted sum of min-max normalised objectives. Ties go to the
        configuration with the fewest set values (`config_size`: fewest non-default controls),
        then to its sorted JSON text, so that the order never depends on evaluation order."""
        ok = self.ok_records
        if not ok:
            return []
        scores = self._scalar_scores(ok)
        order = sorted(range(len(ok)), key=lambda i: (scores[i], *tie_break(ok[i].config)))
        return [ok[i] for i in order[:k]]

    @property
    def best_config(self) -> Any:
        """Configuration of the best evaluation (None if nothing succeeded)."""
        best = self.best(1)
        return best[0].config if best else None

    def pareto_front(self) -> list[EvaluationRecord]:
        """Successful evaluations that no other successful evaluation dominates."""
        ok = self.ok_records
        if not ok:
            return []
        front = non_dominated(np.array([r.minimised(self.objectives) for r in ok]))
        return [r for r, on_front in zip(ok, front, strict=True) if on_front]

    def _scalar_scores(self, records: Sequence[EvaluationRecord]) -> np.ndarray:
        F = np.array([r.minimised(self.objectives) for r in records])
        if F.shape[1] == 1:
            return F[:, 0]
        front = {r.candidate_id for r in self.pareto_front()}
        low, high = F.min(axis=0), F.max(axis=0)
        span = np.where(high > low, high - low, 1.0)
        weights = np.array([o.weight for o in self.objectives])
        scores = ((F - low) / span) @ weights
        # Dominated points always rank after the front.
        return np.array(
            [
                s if r.candidate_id in front else s + weights.sum() + 1
                for r, s in zip(records, scores, strict=True)
            ]
        )

    def table(self) -> pd.DataFrame:
        """One row per evaluation: ids, status, objective values and `config/<key>` columns."""
        import pandas as pd

        rows = []
        for r in self.records:
            row: dict[str, Any] = {
                "candidate_id": r.candidate_id,
                "generation": r.generation,
                "origin": r.origin,
                "status": r.status,
                "error": one_line_error(r.info.get("error")),
                "elapsed_s": r.elapsed_s,
            }
            for o in self.objectives:
                row[o.name] = r.values[o.name] if r.values else np.nan
            for key, value in flatten_config(r.config).items():
                row[f"config/{key}"] = value
            row["config_json"] = json.dumps(r.config, sort_keys=True)
            rows.append(row)
        return pd.DataFrame(rows)

    @classmethod
    def from_table(
        cls, table: pd.DataFrame, objectives: Sequence[Objective], *, source: str = "table"
    ) -> SearchResults:
        """The results of an earlier search from its `table()` (read back from
        evaluations.csv or .parquet): configurations from `config_json`, values from the
        objectives' columns. Genes are left empty: they belong to the space searched then.

        Raises:
            ReportError: a column is missing or a row's `config_json` is not JSON; the
                message names `source`, the column and the row.
        """
        import pandas as pd

        names = [o.name for o in objectives]
        missing = [c for c in ("config_json", "status", *names) if c not in table.columns]
        if missing:
            raise ReportError(
                f"{source}: needs the columns {missing} (an evaluations table written by "
                f"ciq-tune, objectives {names}); has {list(table.columns)}"
            )
        # A value that is not a number (an empty cell of a failure) reads as NaN: not ok.
        numbers = {n: pd.to_numeric(table[n], errors="coerce").to_numpy(float) for n in names}
        records = []
        for i, row in enumerate(table.to_dict("records")):
            try:
                config = json.loads(row["config_json"])
            except (TypeError, ValueError, RecursionError) as exc:
                raise ReportError(
                    f"{source}: row {i + 1}, column config_json must be a JSON configuration, "
                    f"got {row['config_json']!r}"
                ) from exc
            values = {n: float(numbers[n][i]) for n in names}
            ok = row["status"] == OK and all(math.isfinite(v) for v in values.values())
            records.append(
                EvaluationRecord(
                    candidate_id=int(row.get("candidate_id", i)),
                    generation=int(row.get("generation", 0)),
                    config=config,
                    genes=(),
                    key=str(row["config_json"]),
                    origin=str(row.get("origin", "")),
                    status=str(row["status"]) if row["status"] != OK or ok else "invalid_result",
                    values=values if ok else None,
                    elapsed_s=float(row["elapsed_s"]) if pd.notna(row.get("elapsed_s")) else 0.0,
                )
            )
        return cls(objectives, records)

    def to_csv(self, path: str | Path) -> Path:
        path = Path(path)
        self.table().to_csv(path, index=False)
        return path

    def to_parquet(self, path: str | Path) -> Path:
        path = Path(path)
        self.table().to_parquet(path, index=False)
        return path

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        best = self.best(1)
        summary = f", best={best[0].values}" if best else ""
        return f"SearchResults({len(self.records)} evaluations, {len(self.ok_records)} ok{summary})"


def config_size(config: Any) -> int:
    """How many values a configuration sets: its compiler controls when it has a "controls"
    part (a knocked-out control is absent: the compiler's default), else all its values."""
    if isinstance(config, Mapping) and isinstance(config.get("controls"), Mapping):
        return len(flatten_config(config["controls"]))
    return len(flatten_config(config))


def tie_break(config: Any) -> tuple[int, str]:
    """The order among equally good configurations: fewest set values, then sorted JSON."""
    return config_size(config), json.dumps(config, sort_keys=True, default=str)


def one_line_error(error: Any) -> str:
    """The last non-empty line of an error text (where compilers and Python put the cause)."""
    lines = [line.strip() for line in str(error or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def flatten_config(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested configuration as ``{"params/BLOCK": 64, …}`` (table columns, MLflow
    parameters); a list is one JSON string."""
    if isinstance(config, Mapping):
        out: dict[str, Any] = {}
        for k, v in config.items():
            out.update(flatten_config(v, f"{prefix}{k}/"))
        return out
    if isinstance(config, list):
        return {prefix.rstrip("/"): json.dumps(config)}
    return {prefix.rstrip("/") or "value": config}


def _json_safe_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """`info` as strict JSON (states and results are read back strictly): a NaN or infinite
    number becomes null (no value, as a failed shape has), anything else JSON cannot hold its
    repr."""
    safe = {}
    for key, value in info.items():
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            value = repr(value)
        safe[key] = value
    return safe


def finite_number(value: Any) -> float | None:
    """`value` as a float when it is a finite number (not a bool), else None: a metric read
    from a result, where a failure leaves NaN, None or nothing."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def parse_values(
    objectives: Sequence[Objective],
    values: float | Sequence[float] | Mapping[str, float] | None,
    status: str,
) -> tuple[dict[str, float] | None, str]:
    """Objective values by name and the evaluation's status.

    `values` is a number (one objective), a sequence in objective order or a mapping by name.
    A missing, non-numeric, NaN or infinite value turns "ok" into "invalid_result"; a sequence
    of the wrong length is a caller's error (`EngineError`).
    """
    if status != OK or values is None:
        return None, status if status != OK else "invalid_result"
    names = [o.name for o in objectives]
    if isinstance(values, Mapping):
        if any(n not in values for n in names):
            return None, "invalid_result"
        raw = [values[n] for n in names]
    elif isinstance(values, (int, float, np.number)):
        raw = [values]
    else:
        raw = list(values)
    if len(raw) != len(names):
        raise EngineError(
            f"expected {len(names)} objective values ({names}), got {len(raw)}: {values!r}"
        )
    try:
        parsed = {n: float(v) for n, v in zip(names, raw, strict=True)}
    except (TypeError, ValueError):
        return None, "invalid_result"
    if not all(math.isfinite(v) for v in parsed.values()):
        return None, "invalid_result"
    return parsed, OK


# Keys Ray Tune adds to every result: not the trainable's, so not named as what it reported.
_TUNE_KEY_PREFIXES = (
    "time",
    "date",
    "node",
    "pid",
    "hostname",
    "done",
    "trial_",
    "experiment",
    "config/",
)


def result_outcome(result: Any, metrics: Sequence[str]) -> tuple[dict[str, float] | None, str, str]:
    """``(values, status, error)`` of a trainable's result dict: anything but a finite number
    for every metric is a failed evaluation (``no_result``, ``invalid_result``,
    ``missing_metric`` or the result's own ``status``), never an exception."""
    if result is None:
        return None, "no_result", "the trial ended without a result"
    if not isinstance(result, Mapping):
        return None, "invalid_result", f"the result is a {type(result).__name__}, not a dict"
    reported = result.get("status", OK)
    if not isinstance(reported, str) or not reported:
        return None, "invalid_result", f"`status` must be a non-empty string, got {reported!r}"
    error = result.get("error")
    error_text = error if isinstance(error, str) else ""
    if reported != OK:
        return None, reported, error_text
    missing = [m for m in metrics if m not in result]
    if missing:
        reported_keys = sorted(str(k) for k in result if not str(k).startswith(_TUNE_KEY_PREFIXES))
        return None, "missing_metric", f"the result has no {missing} (it reported {reported_keys})"
    for name in metrics:
        problem = _metric_problem(result[name])
        if problem is not None:
            return None, "invalid_result", f"metric `{name}` is {result[name]!r}: {problem}"
    return {m: float(result[m]) for m in metrics}, OK, ""


def _metric_problem(value: Any) -> str | None:
    """Why `value` is not a metric value (a finite real number), or None when it is one."""
    # bool is an int to Python, and float() accepts "0.5": neither is a measured value.
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        return f"a {type(value).__name__}, not a number"
    if not math.isfinite(float(value)):
        return "not finite"
    return None
