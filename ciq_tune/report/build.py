"""`build_report`: the PNGs and one self-contained HTML page of a finished run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel
from pydantic import ConfigDict

from ciq_tune.errors import ReportError
from ciq_tune.report.importance import MIN_ROWS_FOR_IMPORTANCE
from ciq_tune.report.importance import Importance
from ciq_tune.report.importance import parameter_importance
from ciq_tune.report.page import render_page
from ciq_tune.report.plots import convergence_plot
from ciq_tune.report.plots import importance_plot
from ciq_tune.report.plots import pareto_plot
from ciq_tune.report.table import find_table
from ciq_tune.report.table import infer_objectives
from ciq_tune.report.table import load_evaluations
from ciq_tune.report.table import ok_rows
from ciq_tune.report.table import parameter_columns
from ciq_tune.results import Objective

VALIDATION_NAME = "validation.json"
"""The end-of-search validation `ciq-tune tune` writes next to the table (shown when present)."""


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
    ok = ok_rows(df, objectives)

    convergence = convergence_plot(df, objectives, out / "convergence.png")
    pareto = None
    if 2 <= len(objectives) <= 3 and len(ok):
        pareto = pareto_plot(df, objectives, out / "pareto.png")
    details = None
    importance = None
    if len(ok) >= MIN_ROWS_FOR_IMPORTANCE and parameter_columns(df):
        details = parameter_importance(df, objectives[0], seed=seed)
        if details.parameters:
            importance = importance_plot(details, out / "importance.png")
    validation = table.parent / VALIDATION_NAME
    page = out / "report.html"
    page.write_text(
        render_page(
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
