"""Parameter importance: permutation importance of a random forest, or eta squared."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel
from pydantic import ConfigDict

from ciq_tune.report.table import CONFIG_PREFIX
from ciq_tune.report.table import ok_rows
from ciq_tune.report.table import parameter_columns
from ciq_tune.results import Objective

if TYPE_CHECKING:
    import pandas as pd

# Below this many successful evaluations a fitted importance model is mostly noise.
MIN_ROWS_FOR_IMPORTANCE = 10


class Importance(BaseModel):
    """Parameter importance for one objective.

    Attributes:
        method: "permutation (random forest)" — the drop in held-out R² when a parameter's
            column is shuffled, averaged over 5 folds × 5 shuffles (scikit-learn); or
            "variance (eta squared)" — the share of the objective's variance explained by
            grouping on the parameter alone, used when scikit-learn is missing.
        objective: the objective explained.
        parameters: parameter names (without `config/`), most important first.
        scores: importance per parameter.
        errors: standard deviation of the score over folds and shuffles (0 for "variance").
        r2: mean held-out R² of the forest (how much of the objective the parameters explain);
            None for "variance".
    """

    model_config = ConfigDict(frozen=True)

    method: str
    objective: str
    parameters: list[str]
    scores: list[float]
    errors: list[float]
    r2: float | None


def parameter_importance(df: pd.DataFrame, objective: Objective, *, seed: int = 0) -> Importance:
    """How much each parameter explains `objective` over the successful evaluations: permutation
    importance of a random forest (scikit-learn), or eta squared without scikit-learn."""
    ok = ok_rows(df, [objective])
    X = _design_matrix(ok)
    y = ok[objective.name].to_numpy(dtype=float)
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return _eta_squared(X, y, objective.name)
    return _permutation_importance(X, y, objective.name, seed)


def _design_matrix(ok: pd.DataFrame) -> pd.DataFrame:
    """One numeric column per varying parameter: numbers as they are (knocked out or
    inactive: one below the smallest), everything else as category codes (missing: -1)."""
    import pandas as pd

    columns = {}
    for col in parameter_columns(ok):
        values = ok[col]
        if pd.api.types.is_bool_dtype(values):
            values = values.astype(float)
        if pd.api.types.is_numeric_dtype(values):
            finite = values.dropna()
            below = (finite.min() - 1) if len(finite) else 0.0
            columns[col[len(CONFIG_PREFIX) :]] = values.astype(float).fillna(below)
        else:
            columns[col[len(CONFIG_PREFIX) :]] = pd.Series(
                pd.factorize(values.astype("string"))[0], index=values.index, dtype=float
            )
    return pd.DataFrame(columns, index=ok.index)


def _permutation_importance(X: pd.DataFrame, y: np.ndarray, name: str, seed: int) -> Importance:
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.inspection import permutation_importance
    from sklearn.model_selection import KFold

    drops: list[np.ndarray] = []
    r2: list[float] = []
    for train, test in KFold(n_splits=5, shuffle=True, random_state=seed).split(X):
        model = RandomForestRegressor(n_estimators=100, random_state=seed, n_jobs=1)
        model.fit(X.iloc[train], y[train])
        r2.append(float(model.score(X.iloc[test], y[test])))
        perm = permutation_importance(
            model, X.iloc[test], y[test], n_repeats=5, random_state=seed, n_jobs=1
        )
        drops.append(perm.importances)
    all_drops = np.concatenate(drops, axis=1)
    return _ranked(
        "permutation (random forest)",
        name,
        list(X.columns),
        all_drops.mean(axis=1),
        all_drops.std(axis=1),
        float(np.mean(r2)),
    )


def _eta_squared(X: pd.DataFrame, y: np.ndarray, name: str) -> Importance:
    import pandas as pd

    total = float(np.var(y))
    scores = []
    for col in X.columns:
        values = X[col]
        # Numeric parameters with many values are grouped into quintiles first.
        groups = pd.qcut(values, 5, duplicates="drop") if values.nunique() > 10 else values
        means = pd.Series(y).groupby(groups.to_numpy(), observed=True).transform("mean")
        scores.append(float(np.var(means.to_numpy())) / total if total > 0 else 0.0)
    return _ranked(
        "variance (eta squared)",
        name,
        list(X.columns),
        np.array(scores),
        np.zeros(len(scores)),
        None,
    )


def _ranked(
    method: str,
    name: str,
    params: list[str],
    scores: np.ndarray,
    errors: np.ndarray,
    r2: float | None,
) -> Importance:
    order = np.argsort(-scores, kind="stable")
    return Importance(
        method=method,
        objective=name,
        parameters=[params[i] for i in order],
        scores=[float(scores[i]) for i in order],
        errors=[float(errors[i]) for i in order],
        r2=r2,
    )
