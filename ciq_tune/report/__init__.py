"""Reports of a finished run: convergence, Pareto front, parameter importance; PNGs and HTML.

`table` reads the evaluations table, `importance` explains an objective by the parameters,
`plots` draws the PNGs, `page` renders the HTML template, `build` puts them together.
"""

from __future__ import annotations

from ciq_tune.report.build import VALIDATION_NAME
from ciq_tune.report.build import Report
from ciq_tune.report.build import build_report
from ciq_tune.report.importance import Importance
from ciq_tune.report.importance import parameter_importance
from ciq_tune.report.plots import convergence_plot
from ciq_tune.report.plots import importance_plot
from ciq_tune.report.plots import pareto_plot
from ciq_tune.report.table import TABLE_NAMES
from ciq_tune.report.table import find_table
from ciq_tune.report.table import infer_objectives
from ciq_tune.report.table import load_evaluations
from ciq_tune.report.table import pareto_mask

__all__ = [
    "TABLE_NAMES",
    "VALIDATION_NAME",
    "Importance",
    "Report",
    "build_report",
    "convergence_plot",
    "find_table",
    "importance_plot",
    "infer_objectives",
    "load_evaluations",
    "parameter_importance",
    "pareto_mask",
    "pareto_plot",
]
