"""The report's HTML page, rendered from `templates/report.html.j2` (Jinja2, autoescaped)."""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.report.importance import Importance
from ciq_tune.report.table import ok_rows
from ciq_tune.report.table import pareto_mask
from ciq_tune.results import Objective

if TYPE_CHECKING:
    import pandas as pd

TEMPLATE = "report.html.j2"
# One row per re-measured candidate of validation.json; absent keys stay empty.
VALIDATION_COLUMNS = (
    "rank",
    "candidate_id",
    "verdict",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "p_value",
    "cohens_d",
    "search_values",
    "reason",
)


def render_page(
    title: str,
    df: pd.DataFrame,
    objectives: Sequence[Objective],
    images: dict[str, Path | None],
    importance: Importance | None,
    validation: dict[str, Any] | None,
) -> str:
    """The self-contained page: summary, best rows, Pareto front, validation, embedded PNGs
    and the importance table."""
    from jinja2 import Environment
    from jinja2 import PackageLoader
    from markupsafe import Markup

    ok = ok_rows(df, objectives)
    best = front = None
    front_size = 0
    if len(ok):
        keep = ["candidate_id", "generation", *(o.name for o in objectives), "config_json"]
        keep = [c for c in keep if c in ok.columns]
        best_rows = [
            ok.loc[(o.sign * ok[o.name]).idxmin(), keep].rename(f"best {o.name} ({o.mode})")
            for o in objectives
        ]
        # pandas escapes the cells itself (escape=True); the markup is then safe to insert.
        best = Markup(_frame(best_rows).to_html(escape=True))
        if 2 <= len(objectives) <= 3:
            rows = ok.loc[pareto_mask(ok, objectives), keep]
            front, front_size = Markup(rows.to_html(index=False, escape=True)), len(rows)
    env = Environment(loader=PackageLoader("ciq_tune.report"), autoescape=True)
    env.filters["cell"] = _cell
    return env.get_template(TEMPLATE).render(
        title=title,
        n_evaluations=len(df),
        n_ok=len(ok),
        statuses=df["status"].value_counts().to_dict(),
        best=best,
        front=front,
        front_size=front_size,
        validation=validation,
        validation_columns=VALIDATION_COLUMNS,
        images=[
            (heading, base64.b64encode(path.read_bytes()).decode("ascii"))
            for heading, path in images.items()
            if path is not None
        ],
        importance=importance,
        importance_rows=(
            []
            if importance is None
            else list(zip(importance.parameters, importance.scores, importance.errors, strict=True))
        ),
    )


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _frame(rows: list[pd.Series]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows)
    return frame.map(lambda v: f"{v:.6g}" if isinstance(v, float) and math.isfinite(v) else v)
