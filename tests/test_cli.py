"""Tests of the `ciq-tune` command line: help, apply, check and a short PTX tune."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ciq_tune.cli import COMMANDS
from ciq_tune.cli import main

EXAMPLE = Path(__file__).parents[1] / "examples/kernels/ptx/spill.yaml"
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")


def test_help_lists_every_registered_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert {"apply", "check", "tune"} <= set(COMMANDS)
    for name in COMMANDS:
        assert name in out


def _controls_file(tmp_path: Path) -> Path:
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.controls import detect_ptxas
    from objectives import load_description

    desc = load_description(EXAMPLE)
    record = cf.build(
        kernel=cf.KernelInfo(
            name=desc.name,
            kind="ptx",
            source=str(desc.source),
            source_sha256=desc.source_sha256(),
            arch=desc.arch,
        ),
        catalogs={"ptxas": detect_ptxas()},
        controls={"ptxas": {"register_usage_level": 0}},
        benchmark=cf.Benchmark(metric="spill_bytes", mode="min"),
        scores=cf.Scores(baseline=2052, best=1556),
    )
    return cf.write(tmp_path / "spill.controls.yaml", record)


@needs_ptxas
def test_apply_and_check_accept_a_good_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _controls_file(tmp_path)
    assert main(["apply", str(path)]) == 0
    assert capsys.readouterr().out.strip() == "ptxas: --register-usage-level=0"
    assert main(["check", str(path), "--description", str(EXAMPLE)]) == 0
    assert capsys.readouterr().out.startswith("OK")


@needs_ptxas
def test_check_fails_with_reasons_and_apply_rejects_tampering(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _controls_file(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["kernel"]["source_sha256"] = "0" * 64
    path.write_text(yaml.safe_dump(data))
    assert main(["check", str(path)]) == 1
    assert "MISMATCH: kernel source" in capsys.readouterr().out
    data["rendered"]["ptxas"].append("--output-file=/etc/passwd")
    path.write_text(yaml.safe_dump(data))
    assert main(["apply", str(path)]) == 2
    assert "tampered" in capsys.readouterr().err


def test_tune_rejects_a_zero_budget(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", str(EXAMPLE), "--budget", "0"]) == 2
    assert "--budget" in capsys.readouterr().err


@needs_ptxas
@pytest.mark.slow
def test_tune_writes_a_controls_file_that_apply_and_check_accept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["tune", str(EXAMPLE), "--budget", "8", "--num-cpus", "2", "--out", str(out)]
    assert main(args) == 0
    written = out / "spill.controls.yaml"
    data = yaml.safe_load(written.read_text())
    assert data["scores"]["best"] <= data["scores"]["baseline"]
    assert main(["apply", str(written)]) == 0
    assert main(["check", str(written), "--description", str(EXAMPLE)]) == 0
