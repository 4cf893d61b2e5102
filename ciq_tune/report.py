"""Reports of a finished run: convergence, Pareto front, parameter importance; PNGs and HTML."""

from __future__ import annotations

import argparse
import base64
import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Literal

import numpy as np
from pydantic import BaseModel
from pydantic import ConfigDict

from ciq_tune.errors import ReportError
from ciq_tune.results import OK
from ciq_tune.results import Objective
from ciq_tune.results import non_dominated

if TYPE_CHECKING:
    import pandas as pd

TABLE_NAMES = ("evaluations.parquet", "evaluations.csv")
"""File names `build_report` looks for in a run folder, in this order."""
REQUIRED_COLUMNS = ("candidate_id", "generation", "status")
# Columns of `SearchResults.table()` that are neither objectives nor parameters.
_BOOKKEEPING = {"candidate_id", "generation", "status", "origin", "elapsed_s", "config_json"}
CONFIG_PREFIX = "config/"
VALIDATION_NAME = "validation.json"
"""The end-of-search validation `ciq-tune tune` writes next to the table (shown when present)."""
# Below this many successful evaluations a fitted importance model is mostly noise.
MIN_ROWS_FOR_IMPORTANCE = 10
# Pixels per inch of the PNGs (sharp on a laptop screen, small enough to embed).
DPI = 110


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


class Report(BaseModel):
    """What `build_report` wrote."""

    model_config = ConfigDict(frozen=True)

    html: Path
    convergence: Path
    pareto: Path | None
    importance: Path | None
    importance_details: Importance | None
    validation: Path | None
    objectives: list[Objective]
    n_evaluations: int
    n_ok: int


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
        ReportError: unreadable file, unknown suffix, or a required column is missing.
    """
    import pandas as pd

    path = Path(path)
    try:
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        elif path.suffix == ".csv":
            df = pd.read_csv(path)
        else:
            raise ReportError(f"`path`={str(path)!r}: an evaluations table is .csv or .parquet")
    except (OSError, ValueError) as exc:
        raise ReportError(f"cannot read evaluations table {str(path)!r}: {exc}") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ReportError(f"{path}: missing columns {missing}; has {list(df.columns)}")
    return df.sort_values("candidate_id", kind="stable").reset_index(drop=True)


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


def build_report(
    run: str | Path,
    out_dir: str | Path | None = None,
    *,
    objectives: Sequence[Objective] | None = None,
    title: str | None = None,
    seed: int = 0,
) -> Report:
    """Write convergence, Pareto front and importance PNGs and one self-contained HTML page.

    Args:
        run: a run folder holding `evaluations.parquet`/`.csv`, or the table itself.
        out_dir: where to write (default: `<run folder>/report`).
        objectives: objectives and directions (default: every numeric metric, minimised).
        title: page title (default: the run folder's name).
        seed: seed of the importance model.
    """
    table = find_table(run)
    df = load_evaluations(table)
    objectives = list(objectives) if objectives else infer_objectives(df)
    unknown = [o.name for o in objectives if o.name not in df.columns]
    if unknown:
        raise ReportError(f"objectives {unknown} are not columns of {table}")
    out = Path(out_dir) if out_dir is not None else table.parent / "report"
    out.mkdir(parents=True, exist_ok=True)
    ok = _ok_rows(df, objectives)

    convergence = convergence_plot(df, objectives, out / "convergence.png")
    pareto = None
    if 2 <= len(objectives) <= 3 and len(ok):
        pareto = pareto_plot(df, objectives, out / "pareto.png")
    details = None
    importance = None
    if len(ok) >= MIN_ROWS_FOR_IMPORTANCE and _parameter_columns(df):
        details = parameter_importance(df, objectives[0], seed=seed)
        if details.parameters:
            importance = importance_plot(details, out / "importance.png")
    validation = table.parent / VALIDATION_NAME
    page = out / "report.html"
    page.write_text(
        _html(
            title or table.parent.name,
            df,
            objectives,
            {
                "Convergence": convergence,
                "Pareto front": pareto,
                "Parameter importance": importance,
            },
            details,
            json.loads(validation.read_text()) if validation.is_file() else None,
        )
    )
    return Report(
        html=page,
        convergence=convergence,
        pareto=pareto,
        importance=importance,
        importance_details=details,
        validation=validation if validation.is_file() else None,
        objectives=objectives,
        n_evaluations=len(df),
        n_ok=len(ok),
    )


def convergence_plot(df: pd.DataFrame, objectives: Sequence[Objective], path: Path) -> Path:
    """Each objective against the evaluation number, with the best so far as a step line."""
    plt = _pyplot()
    fig, axes = plt.subplots(
        len(objectives), 1, figsize=(7, 2.8 * len(objectives)), sharex=True, squeeze=False
    )
    x = np.arange(1, len(df) + 1)
    ok_mask = _ok_mask(df, objectives)
    failed = ~(df["status"] == OK).to_numpy()
    boundaries = np.flatnonzero(np.diff(df["generation"].to_numpy())) + 1.5
    for ax, objective in zip(axes[:, 0], objectives, strict=True):
        y = df[objective.name].to_numpy(dtype=float)
        valid = ok_mask & np.isfinite(y)
        signed = np.where(valid, objective.sign * y, np.inf)
        best = objective.sign * np.minimum.accumulate(signed)
        ax.scatter(x[valid], y[valid], s=14, alpha=0.45, label="evaluation")
        ax.step(x, np.where(np.isfinite(best), best, np.nan), where="post", color="C3", lw=2)
        ax.plot([], [], color="C3", lw=2, label="best so far")
        if failed.any():
            ax.plot(
                x[failed],
                np.zeros(failed.sum()),
                "|",
                color="0.3",
                ms=8,
                transform=ax.get_xaxis_transform(),
                label="failed",
            )
        for b in boundaries:
            ax.axvline(b, color="0.85", lw=0.8, zorder=0)
        ax.set_ylabel(f"{objective.name} ({objective.mode})")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[0, 0].set_title(f"Convergence ({int(ok_mask.sum())} ok of {len(df)}; lines: generations)")
    axes[-1, 0].set_xlabel("evaluation")
    return _save(fig, path)


def pareto_plot(df: pd.DataFrame, objectives: Sequence[Objective], path: Path) -> Path:
    """Successful evaluations and their non-dominated front: one panel for 2 objectives, the
    three pairs for 3 (the front is computed in all 3 dimensions)."""
    if not 2 <= len(objectives) <= 3:
        raise ReportError(f"a Pareto plot needs 2 or 3 objectives, got {len(objectives)}")
    plt = _pyplot()
    ok = _ok_rows(df, objectives)
    front = pareto_mask(ok, objectives)
    pairs = [(0, 1)] if len(objectives) == 2 else [(0, 1), (0, 2), (1, 2)]
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.2 * len(pairs), 4.4), squeeze=False)
    for ax, (i, j) in zip(axes[0], pairs, strict=True):
        xi, yj = objectives[i].name, objectives[j].name
        ax.scatter(ok[xi], ok[yj], s=14, color="0.6", alpha=0.6, label="dominated")
        ax.scatter(ok[xi][front], ok[yj][front], s=30, color="C3", label="Pareto front")
        if len(objectives) == 2:
            pts = ok.loc[front, [xi, yj]].sort_values(xi)
            ax.step(pts[xi], pts[yj], where="post", color="C3", lw=1)
            labels = ok.loc[front, ["candidate_id", xi, yj]].itertuples(index=False)
            for cid, px, py in labels:
                ax.annotate(
                    str(cid), (px, py), fontsize=7, xytext=(3, 3), textcoords="offset points"
                )
        ax.set_xlabel(f"{xi} ({objectives[i].mode})")
        ax.set_ylabel(f"{yj} ({objectives[j].mode})")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"Pareto front: {int(front.sum())} of {len(ok)} successful evaluations")
    return _save(fig, path)


def pareto_mask(ok: pd.DataFrame, objectives: Sequence[Objective]) -> np.ndarray:
    """True for the rows of `ok` that no other row dominates (`ciq_tune.results.non_dominated`)."""
    F = np.column_stack([o.sign * ok[o.name].to_numpy(dtype=float) for o in objectives])
    return non_dominated(F.reshape(len(ok), len(objectives)))


def parameter_importance(df: pd.DataFrame, objective: Objective, *, seed: int = 0) -> Importance:
    """How much each parameter explains `objective` over the successful evaluations: permutation
    importance of a random forest (scikit-learn), or eta squared without scikit-learn."""
    ok = _ok_rows(df, [objective])
    X = _design_matrix(ok)
    y = ok[objective.name].to_numpy(dtype=float)
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return _eta_squared(X, y, objective.name)
    return _permutation_importance(X, y, objective.name, seed)


def importance_plot(importance: Importance, path: Path) -> Path:
    """Horizontal bars, most important at the top, with error bars."""
    plt = _pyplot()
    n = len(importance.parameters)
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.35 * n))
    pos = np.arange(n)[::-1]
    ax.barh(pos, importance.scores, xerr=importance.errors, color="C0", alpha=0.8)
    ax.set_yticks(pos, importance.parameters)
    what = "explained share of variance" if importance.r2 is None else "drop in R² when shuffled"
    ax.set_xlabel(what)
    ax.axvline(0, color="0.3", lw=0.8)
    fit = "" if importance.r2 is None else f", held-out R² {importance.r2:.2f}"
    ax.set_title(f"Importance for {importance.objective}: {importance.method}{fit}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ciq-tune report RUN_DIR`."""
    parser.add_argument("run", type=Path, help="run folder with evaluations.parquet/.csv")
    parser.add_argument("--out", type=Path, help="output folder (default RUN_DIR/report)")
    parser.add_argument(
        "--objective",
        action="append",
        default=[],
        metavar="NAME[:min|max]",
        help="objective column and direction (repeatable; default: all numeric metrics, min)",
    )
    parser.add_argument("--title", help="page title (default: the run folder's name)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the importance model")


def report_main(args: argparse.Namespace) -> int:
    """Run `ciq-tune report`; prints the path of the HTML page."""
    objectives = [parse_objective(text) for text in args.objective]
    report = build_report(
        args.run, args.out, objectives=objectives or None, title=args.title, seed=args.seed
    )
    print(f"{report.n_evaluations} evaluations ({report.n_ok} ok); wrote {report.html}")
    return 0


def parse_objective(text: str) -> Objective:
    """`"time_ms"` or `"time_ms:min"` / `"tflops:max"` as an `Objective`."""
    name, _, mode = text.partition(":")
    if mode not in ("", "min", "max") or not name:
        raise ReportError(f"`--objective` is NAME or NAME:min or NAME:max, got {text!r}")
    return Objective(name=name, mode=_mode(mode or "min"))


def _mode(text: str) -> Literal["min", "max"]:
    return "max" if text == "max" else "min"


def _ok_mask(df: pd.DataFrame, objectives: Sequence[Objective]) -> np.ndarray:
    values = df[[o.name for o in objectives]].to_numpy(dtype=float)
    return ((df["status"] == OK).to_numpy()) & np.isfinite(values).all(axis=1)


def _ok_rows(df: pd.DataFrame, objectives: Sequence[Objective]) -> pd.DataFrame:
    return df[_ok_mask(df, objectives)].reset_index(drop=True)


def _parameter_columns(df: pd.DataFrame) -> list[str]:
    return [
        c for c in df.columns if c.startswith(CONFIG_PREFIX) and df[c].nunique(dropna=False) > 1
    ]


def _design_matrix(ok: pd.DataFrame) -> pd.DataFrame:
    """One numeric column per varying parameter: numbers as they are (knocked out or
    inactive: one below the smallest), everything else as category codes (missing: -1)."""
    import pandas as pd

    columns = {}
    for col in _parameter_columns(ok):
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


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a headless node
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _html(
    title: str,
    df: pd.DataFrame,
    objectives: Sequence[Objective],
    images: dict[str, Path | None],
    importance: Importance | None,
    validation: dict[str, Any] | None,
) -> str:
    ok = _ok_rows(df, objectives)
    statuses = df["status"].value_counts().to_dict()
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        "<p>"
        + html.escape(
            f"{len(df)} evaluations, {len(ok)} ok; statuses: "
            + ", ".join(f"{k}: {v}" for k, v in statuses.items())
        )
        + "</p>",
    ]
    if len(ok):
        keep = ["candidate_id", "generation", *(o.name for o in objectives), "config_json"]
        keep = [c for c in keep if c in ok.columns]
        best_rows = []
        for o in objectives:
            row = ok.loc[(o.sign * ok[o.name]).idxmin(), keep]
            best_rows.append(row.rename(f"best {o.name} ({o.mode})"))
        best = _frame(best_rows)
        sections += ["<h2>Best configurations</h2>", best.to_html(escape=True)]
        if 2 <= len(objectives) <= 3:
            front = ok.loc[pareto_mask(ok, objectives), keep]
            sections += [
                f"<h2>Pareto front ({len(front)})</h2>",
                front.to_html(index=False, escape=True),
            ]
    if validation is not None:
        sections += _validation_html(validation)
    for heading, path in images.items():
        if path is None:
            continue
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        alt = html.escape(heading)
        sections.append(f'<h2>{alt}</h2><img alt="{alt}" src="data:image/png;base64,{data}">')
    if importance is not None:
        fit = "" if importance.r2 is None else f"; held-out R² of the model {importance.r2:.3f}"
        rows = "".join(
            f"<tr><td>{html.escape(p)}</td><td>{s:.4g}</td><td>{e:.2g}</td></tr>"
            for p, s, e in zip(
                importance.parameters, importance.scores, importance.errors, strict=True
            )
        )
        sections += [
            f"<p>Importance method: {html.escape(importance.method)}{html.escape(fit)}.</p>",
            f"<table><tr><th>parameter</th><th>importance</th><th>±</th></tr>{rows}</table>",
        ]
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}"
        "img{max-width:100%}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>{''.join(sections)}</body></html>\n"
    )


def _validation_html(validation: dict[str, Any]) -> list[str]:
    """The outcome of `tune`'s re-measurement and one row per candidate (validation.json)."""
    out = [
        "<h2>Validation against the baseline</h2>",
        f"<p>{html.escape(str(validation.get('outcome')))}: "
        f"{html.escape(str(validation.get('reason')))}</p>",
    ]
    columns = ["rank", "candidate_id", "verdict", "speedup", "speedup_ci_low", "speedup_ci_high"]
    columns += ["p_value", "cohens_d", "search_values", "reason"]
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(c.get(k)))}</td>" for k in columns) + "</tr>"
        for c in validation.get("candidates", [])
    )
    if rows:
        head = "".join(f"<th>{html.escape(k)}</th>" for k in columns)
        out.append(f"<table><tr>{head}</tr>{rows}</table>")
    return out


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _frame(rows: list[pd.Series]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows)
    return frame.map(lambda v: f"{v:.6g}" if isinstance(v, float) and math.isfinite(v) else v)
