"""`ciq-tune sample` and `ciq-tune resume` on the PTX spill example."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pandas as pd
import pytest
from ray import tune

from ciq_tune.cli import main
from objectives import load_description
from objectives import make_search_space

EXAMPLE = Path(__file__).parents[2] / "examples/kernels/ptx/spill.yaml"
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")


@needs_ptxas
def test_sample_prints_distinct_configurations_of_the_space(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sample", str(EXAMPLE), "-n", "4", "--seed", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    configs = [json.loads(line) for line in lines]
    assert len(configs) == 4 and len(set(lines)) == 4
    space = make_search_space(load_description(EXAMPLE))
    for config in configs:
        assert space.is_feasible(space.encode(config))
    assert main(["sample", str(EXAMPLE), "-n", "4", "--seed", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == lines


def test_resume_needs_a_tune_output_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["resume", str(tmp_path)]) == 2
    assert "has no run.json" in capsys.readouterr().err


class _InterruptOnce(tune.Callback):
    """Sends SIGINT (as Ctrl+C would) once `after` trials completed; `marker` records that it
    did, since `Tuner.restore` brings the callback back with the run configuration."""

    def __init__(self, after: int, marker: Path) -> None:
        self.after, self.marker, self.done = after, marker, 0

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:  # type: ignore[no-untyped-def]
        self.done += 1
        if self.done == self.after and not self.marker.exists():
            self.marker.touch()
            os.kill(os.getpid(), signal.SIGINT)


@needs_ptxas
@pytest.mark.slow
def test_resume_finishes_an_interrupted_tune_run(
    ray_cluster: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import searchers.tracking

    monkeypatch.setattr(
        searchers.tracking,
        "tracking_callbacks",
        lambda *a, **k: [_InterruptOnce(3, tmp_path / "interrupted")],
    )
    out = tmp_path / "run"
    args = ["--budget", "8", "--num-cpus", "2", "--tracking", "none", "--out", str(out)]
    main(["tune", str(EXAMPLE), *args, "--runtime", "ray"])
    interrupted = pd.read_csv(out / "evaluations.csv")
    assert 3 <= len(interrupted) < 8
    assert main(["resume", str(out), "--trust-pickle"]) == 0
    table = pd.read_csv(out / "evaluations.csv")
    assert len(table) == 8 and table["config_json"].nunique() == 8
    assert (out / "spill.controls.yaml").is_file()
    assert "8 evaluations" in capsys.readouterr().out
