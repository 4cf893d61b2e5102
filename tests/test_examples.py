"""The examples run and print what they promise (each starts its own Ray)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(name: str, tmp_path: Path) -> str:
    # HOME moves ~/ray_results under tmp_path (Ray rejects the old TUNE_RESULT_DIR).
    env = {**os.environ, "RAY_AIR_NEW_OUTPUT": "0", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, f"{name} exited with {out.returncode}:\n{out.stderr[-4000:]}"
    return out.stdout


def test_toy_example_finds_the_optimum(tmp_path: Path) -> None:
    assert "best score 2.0 at {'x': 1.0, 'y': 1" in _run("toy_single_objective.py", tmp_path)


def test_pareto_example_prints_a_front(tmp_path: Path) -> None:
    out = _run("pareto_two_objectives.py", tmp_path)
    assert "Pareto front (" in out and " mJ " in out


def test_resume_example_keeps_the_budget(tmp_path: Path) -> None:
    out = _run("resume_interrupted.py", tmp_path)
    assert "after restore: 40 trials, 40 distinct configurations" in out
