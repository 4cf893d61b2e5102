"""A user's own vendor controls file offered to the search with real ptxas executables: refused
in one line by a ptxas that cannot take it, an opaque choice (against no file) for one that can.
The file here is not a controls file (random bytes): ptxas refuses it, and that candidate alone
fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ciq_tune.controls.ptxas import detect_ptxas
from objectives import load_description
from objectives import make_search_space

REPO = Path(__file__).resolve().parents[2]
SPILL = REPO / "examples/kernels/ptx/spill.yaml"


def _takes_apply_controls(ptxas: str) -> bool:
    help_text = subprocess.run([ptxas, "--help"], capture_output=True, text=True, timeout=60)
    return "--apply-controls" in help_text.stdout


def _ptxas_with_apply_controls() -> Path | None:
    """A ptxas that takes --apply-controls: on PATH, or from the nvidia-cuda-nvcc wheel."""
    found = [shutil.which("ptxas")]
    for entry in sys.path:
        found += [str(p) for p in Path(entry).glob("nvidia/*/bin/ptxas")] if entry else []
    return next((Path(p) for p in found if p and _takes_apply_controls(p)), None)


def _not_a_controls_file(folder: Path) -> Path:
    path = folder / "not-a-controls-file.bin"
    path.write_bytes(bytes(range(256)) * 4)
    return path


def _tune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ciq_tune.cli", "tune", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="no ptxas on PATH")
def test_a_ptxas_without_apply_controls_refuses_the_file_in_one_line(tmp_path: Path) -> None:
    if _takes_apply_controls(str(shutil.which("ptxas"))):
        pytest.skip("the ptxas on PATH takes --apply-controls")
    vendor = _not_a_controls_file(tmp_path)
    done = _tune(str(SPILL), "--vendor-controls", str(vendor), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "has no --apply-controls option" in line and "13.3" in line


def test_the_vendor_file_is_one_opaque_choice_against_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ptxas = _ptxas_with_apply_controls()
    if ptxas is None:
        pytest.skip("no ptxas >= 13.3 installed (pip install nvidia-cuda-nvcc)")
    from objectives.ptx import evaluate

    vendor = _not_a_controls_file(tmp_path)
    desc = load_description(SPILL)
    desc = desc.model_copy(
        update={
            "controls": {
                "ptxas": desc.controls["ptxas"].model_copy(
                    update={"vendor_controls_files": [str(vendor)]}
                )
            }
        }
    )
    catalog = detect_ptxas(ptxas, vendor_controls_files=[str(vendor)])
    # The space as the search builds it, with this ptxas first on PATH.
    monkeypatch.setenv("PATH", f"{ptxas.parent}:{os.environ['PATH']}")
    space = make_search_space(desc)
    (choice,) = [leaf for leaf in space.leaves if leaf.key.endswith("apply_controls")]
    assert list(choice.param.values) == [str(vendor)] and choice.param.knockout_prob is not None
    without = evaluate(desc, {"controls": {"ptxas": {}}}, catalog=catalog)
    offered = {"controls": {"ptxas": {"apply_controls": str(vendor)}}}
    with_file = evaluate(desc, offered, catalog=catalog)
    assert without["status"] == "ok"
    # ptxas itself read the file and refused it: a compile error of this candidate only.
    assert with_file["status"] == "compile_error"
    assert "controls file" in with_file["error"]


@pytest.mark.ray
@pytest.mark.slow
def test_tune_offers_the_file_and_keeps_every_other_evaluation(tmp_path: Path) -> None:
    ptxas = _ptxas_with_apply_controls()
    if ptxas is None:
        pytest.skip("no ptxas >= 13.3 installed (pip install nvidia-cuda-nvcc)")
    import csv

    vendor = _not_a_controls_file(tmp_path)
    out = tmp_path / "out"
    args = ["--budget", "6", "--num-cpus", "2", "--tracking", "none", "--out", str(out)]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ciq_tune.cli",
            "tune",
            str(SPILL),
            "--vendor-controls",
            str(vendor),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, "PATH": f"{ptxas.parent}:{os.environ['PATH']}"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with (out / "evaluations.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    offered = [r for r in rows if r.get("config/controls/ptxas/apply_controls")]
    # Tried on the defaults among the starting points; refused by ptxas, nothing else lost.
    assert len(offered) >= 1 and offered[0]["origin"] == "initial"
    assert all(r["status"] == "compile_error" for r in offered)
    assert sum(r["status"] == "ok" for r in rows) == len(rows) - len(offered) >= 4


def test_vendor_files_in_a_description_are_checked_on_load(tmp_path: Path) -> None:
    import yaml

    from ciq_tune.cli import main
    from objectives.description import DescriptionError

    vendor = _not_a_controls_file(tmp_path)
    data = yaml.safe_load(SPILL.read_text())
    data["source"] = str(SPILL.with_name("spill.ptx"))
    data["controls"] = {"ptxas": {"vendor_controls_files": [vendor.name]}}
    path = tmp_path / "spill.yaml"
    path.write_text(yaml.safe_dump(data))
    # Relative to the description file.
    assert load_description(path).vendor_controls_files("ptxas") == (str(vendor),)
    data["controls"]["ptxas"]["vendor_controls_files"] = ["absent.bin"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(DescriptionError, match=r"vendor_controls_files\[0\]`: .*absent.bin"):
        load_description(path)
    # A kind whose controls hold no ptxas catalog cannot take one.
    triton = REPO / "examples/kernels/triton/softmax.yaml"
    assert main(["tune", str(triton), "--vendor-controls", str(vendor)]) == 2
