"""Ctrl+C during `ciq-tune tune`: exit 130, every finished evaluation on disk, the printed count
equal to the table's rows; `ciq-tune resume` then finishes the run on budget."""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[1] / "examples/kernels/ptx/spill.yaml"
ROOT = Path(__file__).parents[1]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.ray,  # the command starts Ray in its own process
    pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed"),
]


def _finished_trials(out: Path) -> int:
    return sum(1 for p in (out / "ray").rglob("result.json") if p.stat().st_size > 0)


def _rows(path: Path) -> int:
    with open(path) as f:
        return sum(1 for _ in csv.DictReader(f))


def test_sigint_exits_130_with_the_tables_count_and_resume_finishes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # Large enough that Ctrl+C lands mid-search: an idle 2-core machine runs ~6 PTX evaluations/s.
    budget = 150
    command = [sys.executable, "-m", "ciq_tune.cli", "tune", str(EXAMPLE), "--budget", str(budget)]
    command += ["--num-cpus", "2", "--tracking", "none", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    deadline = time.monotonic() + 600
    started: float | None = None  # when Tune created its folder
    while proc.poll() is None and time.monotonic() < deadline:
        if started is None and (out / "ray").exists():
            started = time.monotonic()
        # Tune may write result.json files late, so a few seconds of search also count.
        if started is not None and (_finished_trials(out) >= 4 or time.monotonic() - started > 6):
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr
    printed = re.search(r"interrupted: (\d+) evaluations \((\d+) ok\)", stdout)
    assert printed is not None, stdout
    count = int(printed.group(1))
    assert 0 < count < budget
    assert count == _rows(out / "evaluations.csv")
    assert not (out / "spill.controls.yaml").exists()  # no winner from a partial search

    resumed = subprocess.run(
        [sys.executable, "-m", "ciq_tune.cli", "resume", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _rows(out / "evaluations.csv") == budget
    assert (out / "spill.controls.yaml").exists()
