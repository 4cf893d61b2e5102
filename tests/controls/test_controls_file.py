"""Tests of the controls file: round trip, re-validation on load, tampering, `check` reasons."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from ciq_tune.controls import controls_file as cf
from ciq_tune.controls import detect_ptxas
from ciq_tune.errors import ControlsFileError

pytestmark = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")


def _record(tmp_path: Path, controls: dict[str, Any] | None = None) -> tuple[Path, Path]:
    source = tmp_path / "k.ptx"
    source.write_text("// kernel\n")
    record = cf.build(
        kernel=cf.KernelInfo(
            name="k",
            kind="ptx",
            source="k.ptx",
            source_sha256=hashlib.sha256(source.read_bytes()).hexdigest(),
            arch="sm_90",
        ),
        catalogs={"ptxas": detect_ptxas()},
        controls={"ptxas": controls or {"opt_level": 1, "return_at_end": True}},
        benchmark=cf.Benchmark(metric="spill_bytes", mode="min"),
        scores=cf.Scores(baseline=2052, best=1116, improvement_pct=45.6),
        validation={"p_value": 0.01, "opaque": {"kept": [1, 2]}},
    )
    return cf.write(tmp_path / "k.controls.yaml", record), source


def _edit(path: Path, change: Any) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


def test_round_trip_renders_and_checks(tmp_path: Path) -> None:
    path, source = _record(tmp_path)
    loaded = cf.load(path)
    assert cf.render(loaded) == {"ptxas": ["--opt-level=1", "--return-at-end"]}
    assert loaded.validation == {"p_value": 0.01, "opaque": {"kept": [1, 2]}}
    assert loaded.compilers["ptxas"]["version"] == detect_ptxas().version
    assert cf.check(loaded, source=source, arch="sm_90", check_gpu=False) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["controls"]["ptxas"].update(output_file="/etc/passwd"), "output_file"),
        (lambda d: d["controls"]["ptxas"].update(opt_level="1; rm -rf ~"), "opt_level"),
        (lambda d: d["controls"]["ptxas"].update(opt_level="$(reboot)"), "opt_level"),
        (lambda d: d["rendered"]["ptxas"].extend(["-o", "/etc/passwd"]), "tampered"),
        (lambda d: d["rendered"].update(ptxas=["--options-file=/tmp/x"]), "tampered"),
        (lambda d: d["controls"]["ptxas"].update(apply_controls="/etc/passwd"), "apply_controls"),
        (lambda d: d["vendor_controls_files"].update({"/etc/passwd": "0" * 64}), "allow it"),
    ],
)
def test_hostile_edits_are_rejected_on_render(tmp_path: Path, change: Any, message: str) -> None:
    path, _ = _record(tmp_path)
    _edit(path, change)
    with pytest.raises(ControlsFileError, match=message):
        cf.render(cf.load(path))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(schema="something-else"), "schema"),
        (lambda d: d.update(schema_version=3), "schema_version"),
        (lambda d: d.update(shell="rm -rf /"), "shell"),
        (lambda d: d["controls"].update(gcc={"O": 3}), "controls.gcc"),
        (lambda d: d["kernel"].update(source_sha256="nothex"), "kernel.source_sha256"),
    ],
)
def test_malformed_files_are_rejected_on_load(tmp_path: Path, change: Any, message: str) -> None:
    path, _ = _record(tmp_path)
    _edit(path, change)
    with pytest.raises(ControlsFileError, match=message):
        cf.load(path)


def test_oversized_and_non_yaml_files(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("x" * (cf.MAX_FILE_BYTES + 1))
    with pytest.raises(ControlsFileError, match="too large"):
        cf.load(big)
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: [\n")
    with pytest.raises(ControlsFileError, match="not valid YAML"):
        cf.load(bad)


def test_check_reports_changed_source_arch_toolchain_and_gpu(tmp_path: Path) -> None:
    path, source = _record(tmp_path)
    source.write_text("// edited kernel\n")
    _edit(path, lambda d: d["compilers"]["ptxas"].update(version="12.1.0"))
    _edit(
        path, lambda d: d.update(gpu={"model": "H100", "compute_capability": "9.0", "driver": "1"})
    )
    loaded = cf.load(path)
    other = cf.GpuInfo(model="A100", compute_capability="8.0", driver="1")
    reasons = cf.check(loaded, source=source, arch="sm_80", gpu=other)
    text = "\n".join(reasons)
    assert "changed" in text and "sm_80" in text and "12.1.0" in text and "A100" in text
    assert len(reasons) == 4
