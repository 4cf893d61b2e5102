"""Kernel trainables print each trial's configuration and result: the log of its actor in Ray."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from objectives import load_description
from objectives import make_search_space
from objectives import make_trainable
from objectives import starting_points
from searchers.kernel_search import logged_trainable

EXAMPLE = Path(__file__).parents[2] / "examples/kernels/ptx/spill.yaml"
pytestmark = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")


def _printed(line_start: str, out: str) -> dict:
    lines = [line for line in out.splitlines() if line.startswith(line_start)]
    assert len(lines) == 1, out
    return json.loads(lines[0].split(" ", 4)[4])


def test_trial_prints_its_configuration_and_result(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CIQ_TUNE_CACHE", str(tmp_path))
    desc = load_description(EXAMPLE)
    config = starting_points(desc, make_search_space(desc))[0]  # the baseline compiles
    trainable = logged_trainable(desc)
    assert trainable.__name__ == desc.name  # type: ignore[attr-defined]
    result = trainable(config)
    out = capsys.readouterr().out
    # Outside Tune there is no trial id; inside, Tune's id of the trial.
    assert _printed("[ciq-tune] trial None config ", out) == config
    assert _printed("[ciq-tune] trial None result ", out) == json.loads(
        json.dumps(result, default=str)
    )
    assert result["status"] == "ok"


def test_the_objective_alone_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    desc = load_description(EXAMPLE)
    config = make_search_space(desc).sample(1, seed=0)[0]
    make_trainable(desc)(config)
    assert "[ciq-tune]" not in capsys.readouterr().out
