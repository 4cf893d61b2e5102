"""Ctrl+C during `ciq-tune tune`: exit 130, every finished evaluation on disk, the printed count
equal to the table's rows; `ciq-tune resume` then finishes the run on budget. The multi-shape
and campaign paths: tests/searchers/test_matrix_search.py and test_campaign.py."""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from searchers.run.interrupt import graceful_interrupt
from searchers.run.interrupt import report_kept
from tests.searchers.sigint import interrupted_tune

EXAMPLE = Path(__file__).parents[1] / "examples/kernels/ptx/spill.yaml"
ROOT = Path(__file__).parents[1]


def test_the_first_ctrl_c_asks_to_stop_and_the_second_stops_at_once() -> None:
    stops: list[bool] = []
    before = signal.getsignal(signal.SIGINT)
    with graceful_interrupt(lambda: stops.append(True)) as interrupt:
        os.kill(os.getpid(), signal.SIGINT)
        assert interrupt.received and stops == [True]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert stops == [True]
    assert signal.getsignal(signal.SIGINT) is before
    assert "TUNE_DISABLE_SIGINT_HANDLER" not in os.environ


def test_report_kept_prints_one_line_and_returns_130(capsys: pytest.CaptureFixture[str]) -> None:
    assert report_kept(5, 3, "out/evaluations.csv", "run it again") == 130
    assert capsys.readouterr().out == (
        "interrupted: 5 evaluations (3 ok) written to out/evaluations.csv; run it again\n"
    )


def _rows(path: Path) -> int:
    with open(path) as f:
        return sum(1 for _ in csv.DictReader(f))


@pytest.mark.slow
@pytest.mark.ray  # `tune` starts Ray in its own process; `resume` uses the shared one
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
def test_sigint_exits_130_with_the_tables_count_and_resume_finishes(
    tmp_path: Path, ray_cluster: None
) -> None:
    out = tmp_path / "out"
    # The signal follows the first evaluation within milliseconds (at most 2 more are running);
    # 20 leaves the resume work to do.
    budget = 20
    arguments = [str(EXAMPLE), "--budget", str(budget), "--num-cpus", "2", "--tracking", "none"]
    arguments += ["--out", str(out), "--runtime", "ray"]
    returncode, stdout, stderr = interrupted_tune(arguments, budget, tmp_path)
    assert returncode == 130, stdout + stderr
    assert "Traceback" not in stderr
    printed = re.search(r"interrupted: (\d+) evaluations \((\d+) ok\)", stdout)
    assert printed is not None, stdout
    count = int(printed.group(1))
    assert 0 < count < budget
    assert count == _rows(out / "evaluations.csv")
    assert not (out / "spill.controls.yaml").exists()  # no winner from a partial search

    # The interrupted command started and stopped its own Ray; `resume` joins the session's.
    from ciq_tune.cli import main

    # Tune's experiment is pickled: resumed only when the user vouches for the folder.
    assert main(["resume", str(out)]) == 2
    assert _rows(out / "evaluations.csv") == count
    assert main(["resume", str(out), "--trust-pickle"]) == 0
    assert _rows(out / "evaluations.csv") == budget
    assert (out / "spill.controls.yaml").exists()
