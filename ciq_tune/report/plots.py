"""The report's PNGs: convergence, Pareto front (2 or 3 objectives), parameter importance."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import numpy as np

from ciq_tune.errors import ReportError
from ciq_tune.report.importance import Importance
from ciq_tune.report.table import ok_mask
from ciq_tune.report.table import ok_rows
from ciq_tune.report.table import pareto_mask
from ciq_tune.results import OK
from ciq_tune.results import Objective

if TYPE_CHECKING:
    import pandas as pd

# Pixels per inch of the PNGs (sharp on a laptop screen, small enough to embed).
DPI = 110


def convergence_plot(df: pd.DataFrame, objectives: Sequence[Objective], path: Path) -> Path:
    """Each objective against the evaluation number, with the best so far as a step line."""
    plt = _pyplot()
    fig, axes = plt.subplots(
        len(objectives), 1, figsize=(7, 2.8 * len(objectives)), sharex=True, squeeze=False
    )
    x = np.arange(1, len(df) + 1)
    succeeded = ok_mask(df, objectives)
    failed = ~(df["status"] == OK).to_numpy()
    boundaries = np.flatnonzero(np.diff(df["generation"].to_numpy())) + 1.5
    for ax, objective in zip(axes[:, 0], objectives, strict=True):
        y = df[objective.name].to_numpy(dtype=float)
        valid = succeeded & np.isfinite(y)
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
    title = f"Convergence ({int(succeeded.sum())} ok of {len(df)}; lines: generations)"
    axes[0, 0].set_title(title)
    axes[-1, 0].set_xlabel("evaluation")
    return _save(fig, path)


def pareto_plot(df: pd.DataFrame, objectives: Sequence[Objective], path: Path) -> Path:
    """Successful evaluations and their non-dominated front: one panel for 2 objectives, the
    three pairs for 3 (the front is computed in all 3 dimensions)."""
    if not 2 <= len(objectives) <= 3:
        raise ReportError(f"a Pareto plot needs 2 or 3 objectives, got {len(objectives)}")
    plt = _pyplot()
    ok = ok_rows(df, objectives)
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
