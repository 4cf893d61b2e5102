"""Tests of the command line: JSON fields and the markdown table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.replay import DEFAULT_DATA
from bench.replay import Problem
from bench.search_efficiency import main
from tests.bench.conftest import SMALL


def test_cli_writes_json_and_markdown(small: Problem, tmp_path: Path) -> None:
    out = tmp_path / "se.json"
    argv = [
        "--data",
        str(DEFAULT_DATA),
        "--datasets",
        SMALL,
        "--tuners",
        "ciq,random",
        "--seeds",
        "3",
        "--budget",
        "60",
        "--workers",
        "2",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    summary = json.loads(out.read_text())
    stats = summary["datasets"][SMALL]["tuners"]
    assert set(stats) == {"ciq", "random"}
    for tuner in stats.values():
        assert tuner["seeds"] == 3
        assert set(tuner) >= {"evals_to_90", "evals_to_95", "evals_to_98", "mean_fraction"}
        assert tuner["mean_fraction"]["100"] is None  # beyond the budget of 60
        assert 0 < tuner["mean_fraction"]["25"] <= tuner["mean_fraction"]["50"] <= 1
    assert "| kernel_tuner_paper_2018 | ciq |" in out.with_suffix(".md").read_text()


def test_cli_rejects_unknown_tuners(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--tuners", "nope", "--seeds", "1", "--out", str(tmp_path / "x.json")])


def test_ciq_config_sets_the_default_strategys_settings(small: Problem, tmp_path: Path) -> None:
    def run(*extra: str) -> dict:
        out = tmp_path / f"se{len(extra)}.json"
        argv = ["--datasets", SMALL, "--tuners", "ciq", "--seeds", "2", "--budget", "40"]
        assert main([*argv, "--workers", "1", "--out", str(out), *extra]) == 0
        return json.loads(out.read_text())

    default = run()
    other = run("--ciq-config", '{"pool_size": 2, "explore_sampling": "maximin"}')
    assert other["meta"]["ciq_config"] == {"pool_size": 2, "explore_sampling": "maximin"}
    traces = [s["datasets"][SMALL]["tuners"]["ciq"]["mean_fraction"] for s in (default, other)]
    assert traces[0] != traces[1]
    with pytest.raises(SystemExit):
        main(["--seeds", "1", "--ciq-config", "[1]", "--out", str(tmp_path / "x.json")])
