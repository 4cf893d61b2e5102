"""The evaluations table of a run: finding and reading it, objectives, successful rows, front."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ciq_tune.errors import ReportError
from ciq_tune.results import OK
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.results import non_dominated
from ciq_tune.strict_io import FileKind
from ciq_tune.strict_io import read_bytes

if TYPE_CHECKING:
    import pandas as pd

TABLE_NAMES = ("evaluations.parquet", "evaluations.csv")
"""File names `build_report` looks for in a run folder, in this order."""
REQUIRED_COLUMNS = ("candidate_id", "generation", "status")
# Largest evaluations table read, in bytes: over 100 000 evaluations of a kernel search.
MAX_TABLE_BYTES = 64 * 1024 * 1024
# Columns of `SearchResults.table()` that are neither objectives nor parameters.
_BOOKKEEPING = {"candidate_id", "generation", "status", "origin", "elapsed_s", "config_json"}
CONFIG_PREFIX = "config/"


def find_table(run: str | Path) -> Path:
    """The evaluations table of a run folder (or `run` itself when it is a file).

    Raises:
        ReportError: `run` does not exist or holds none of `TABLE_NAMES`.
    """
    run = Path(run)
    if run.is_file():
        return run
    for name in TABLE_NAMES:
        if (run / name).is_file():
            return run / name
    raise ReportError(
        f"`run`={str(run)!r} is not an evaluations table nor a folder holding one of "
        f"{list(TABLE_NAMES)} (write one with SearchResults.to_parquet)"
    )


def load_evaluations(path: str | Path) -> pd.DataFrame:
    """Read an evaluations table (CSV or parquet), ordered by `candidate_id`.

    Raises:
        ReportError: not a regular file of at most `MAX_TABLE_BYTES`, unreadable, unknown
            suffix, or a required column is missing.
    """
    import pandas as pd

    path = Path(path)
    if path.suffix not in (".csv", ".parquet"):
        raise ReportError(f"`path`={str(path)!r}: an evaluations table is .csv or .parquet")
    data = io.BytesIO(read_bytes(path, FileKind("evaluations table", MAX_TABLE_BYTES, ReportError)))
    try:
        df = pd.read_parquet(data) if path.suffix == ".parquet" else pd.read_csv(data)
    except (OSError, ValueError) as exc:
        raise ReportError(f"cannot read evaluations table {str(path)!r}: {exc}") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ReportError(f"{path}: missing columns {missing}; has {list(df.columns)}")
    return df.sort_values("candidate_id", kind="stable").reset_index(drop=True)


def read_results(run: str | Path, objectives: Sequence[Objective]) -> SearchResults:
    """The `SearchResults` of an earlier run: the evaluations table of its folder (or the
    table itself), read with `objectives`' columns (`SearchResults.from_table`).

    Raises:
        ReportError: as `find_table`, `load_evaluations` and `SearchResults.from_table`.
    """
    table = find_table(run)
    return SearchResults.from_table(load_evaluations(table), objectives, source=str(table))


def infer_objectives(df: pd.DataFrame) -> list[Objective]:
    """Numeric columns that are neither bookkeeping nor `config/…`, all minimised."""
    import pandas as pd

    names = [
        c
        for c in df.columns
        if c not in _BOOKKEEPING
        and not c.startswith(CONFIG_PREFIX)
        and pd.api.types.is_numeric_dtype(df[c])
        and df[c].notna().any()
    ]
    if not names:
        raise ReportError(f"no numeric objective column among {list(df.columns)}")
    return [Objective(name=n) for n in names]


def pareto_mask(ok: pd.DataFrame, objectives: Sequence[Objective]) -> np.ndarray:
    """True for the rows of `ok` that no other row dominates (`ciq_tune.results.non_dominated`)."""
    F = np.column_stack([o.sign * ok[o.name].to_numpy(dtype=float) for o in objectives])
    return non_dominated(F.reshape(len(ok), len(objectives)))


def ok_mask(df: pd.DataFrame, objectives: Sequence[Objective]) -> np.ndarray:
    values = df[[o.name for o in objectives]].to_numpy(dtype=float)
    return ((df["status"] == OK).to_numpy()) & np.isfinite(values).all(axis=1)


def ok_rows(df: pd.DataFrame, objectives: Sequence[Objective]) -> pd.DataFrame:
    return df[ok_mask(df, objectives)].reset_index(drop=True)


def parameter_columns(df: pd.DataFrame) -> list[str]:
    return [
        c for c in df.columns if c.startswith(CONFIG_PREFIX) and df[c].nunique(dropna=False) > 1
    ]
