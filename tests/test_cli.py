"""Tests of the `ciq-tune` command line: help, apply, check and a short PTX tune."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from ciq_tune.cli import COMMANDS
from ciq_tune.cli import main
from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.validation import ValidationConfig
from ciq_tune.validation import validate_search
from searchers.run.outputs import write_outputs

EXAMPLE = Path(__file__).parents[1] / "examples/kernels/ptx/spill.yaml"
TRITON_EXAMPLE = Path(__file__).parents[1] / "examples/kernels/triton/softmax.yaml"
TINY_PTX = Path(__file__).parent / "objectives/data/tiny.ptx"
TRITON_MATMUL = Path(__file__).parents[1] / "examples/kernels/triton/matmul.yaml"
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


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_help_has_a_description_and_an_example(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([name, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert " ".join(COMMANDS[name].description.split()[:4]) in " ".join(text.split())
    # An indented example line (the usage line also says "ciq-tune NAME", unindented).
    assert f"\n  ciq-tune {name} " in text, f"`ciq-tune {name} --help` shows no example"


@needs_ptxas
@pytest.mark.parametrize(("argv", "forwarded"), [([], False), (["--verbose"], True)])
def test_tune_keeps_trial_output_off_the_console_unless_verbose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], forwarded: bool
) -> None:
    import ray

    from ciq_tune.errors import CiqTuneError

    seen: dict[str, Any] = {}

    def fake_init(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise CiqTuneError("stopped before the search")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fake_init)
    argv = [*argv, "--runtime", "ray"]
    assert main(["tune", str(EXAMPLE), "--out", str(tmp_path), *argv]) == 2
    assert seen["log_to_driver"] is forwarded


@pytest.mark.parametrize("name", ["tune", "resume"])
def test_tune_and_resume_say_where_quiet_trial_output_goes(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([name, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--verbose" in text and "/tmp/ray/session_latest/logs/worker-*.out" in text


def test_tune_rejects_too_few_validation_repetitions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", str(EXAMPLE), "--validate-repetitions", "2"]) == 2
    assert "`--validate-repetitions`=2" in capsys.readouterr().err


@needs_ptxas
@pytest.mark.parametrize(("speedup", "outcome"), [(1.05, "kept"), (1.0, "baseline")])
def test_tune_writes_the_validated_winner_or_else_the_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], speedup: float, outcome: str
) -> None:
    from objectives import load_description
    from objectives import make_search_space
    from objectives import starting_points

    desc = load_description(EXAMPLE)
    points = starting_points(desc, make_search_space(desc))
    baseline, preset = points[0], points[2]  # the search saw `preset` as best
    seen = {0: 2052.0, 1: 1556.0}
    records = [
        EvaluationRecord(i, 0, c, (i,), str(i), "initial", "ok", {"spill_bytes": seen[i]}, 0.1)
        for i, c in enumerate([baseline, preset])
    ]
    results = SearchResults([Objective(name="spill_bytes")], records)
    grid = [
        SimpleNamespace(config=r.config, metrics={"status": "ok", **(r.values or {})})
        for r in records
    ]
    rng = np.random.default_rng(0)

    def measure(config: Any) -> float:  # synthetic: the preset is truly `speedup` times faster
        return (1.0 if config == baseline else 1.0 / speedup) * (1 + 0.025 * rng.normal())

    validation = validate_search(results, measure, baseline, k=1)
    assert write_outputs(tmp_path, desc, results, grid, points, validation) == 0
    written = tmp_path / "spill.controls.yaml"
    data = yaml.safe_load(written.read_text())
    block = data["validation"]
    assert block["outcome"] == outcome
    assert json.loads((tmp_path / "validation.json").read_text()) == block
    assert block["candidates"][0]["candidate_config"] == preset
    if outcome == "kept":
        assert data["controls"] == preset["controls"] and data["scores"]["best"] == 1556.0
        assert block["winner"]["verdict"] == "KEPT" and block["winner"]["speedup"] > 1.0
    else:
        assert data["controls"] == {"ptxas": {}} and data["scores"]["best"] == 2052.0
        assert data["scores"]["improvement_pct"] == 0.0 and block["winner"] is None
    assert f"validation: {outcome}" in capsys.readouterr().out
    assert main(["apply", str(written)]) == 0
    assert main(["check", str(written), "--description", str(EXAMPLE)]) == 0


@needs_ptxas
@pytest.mark.slow
def test_tune_writes_a_controls_file_that_apply_and_check_accept(
    ray_cluster: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["tune", str(EXAMPLE), "--budget", "8", "--num-cpus", "2", "--runtime", "ray"]
    args += ["--out", str(out)]
    assert main([*args, "--tracking", "none"]) == 0
    # Tune's banner gives the budget as its number of trials (not sys.maxsize).
    banner = re.search(r"Number of trials\s+(\d+)", capfd.readouterr().out)
    assert banner is not None and banner.group(1) == "8"
    written = out / "spill.controls.yaml"
    data = yaml.safe_load(written.read_text())
    assert data["scores"]["best"] <= data["scores"]["baseline"]
    # spill_bytes is exact: the documented skip, and the search's best is written.
    assert data["validation"]["outcome"] == "skipped"
    assert "reproduces exactly" in data["validation"]["reason"]
    assert json.loads((out / "validation.json").read_text()) == data["validation"]
    assert main(["apply", str(written)]) == 0
    assert main(["check", str(written), "--description", str(EXAMPLE)]) == 0
    # A later run of the same kernel starts from this one's 4 best (another GPU, in real use).
    again = tmp_path / "again"
    assert main([*args[:-1], str(again), "--tracking", "none", "--transfer-from", str(out)]) == 0
    later = pd.read_csv(again / "evaluations.csv").sort_values("candidate_id")
    initial = later.query("origin == 'initial'")  # the description's starting points first
    earlier = pd.read_csv(out / "evaluations.csv").query("status == 'ok'")
    untried = earlier[~earlier["config_json"].isin(initial["config_json"])]
    n = min(4, len(untried))
    transferred = later.iloc[len(initial) : len(initial) + n]
    assert n >= 1 and list(transferred["origin"]) == ["transfer"] * n
    assert (later["origin"] == "transfer").sum() == n
    assert set(transferred["config_json"]) <= set(untried["config_json"])
    assert sorted(transferred["spill_bytes"]) == sorted(untried["spill_bytes"].nsmallest(n))


@pytest.mark.gpu
def test_a_triton_search_on_a_gpu_validates_its_winner(ray_cluster: None, tmp_path: Path) -> None:
    # The per-GPU benchmark server holds the GPU while the search runs; the validation after it
    # asks for that GPU (on a one-GPU machine it waited for ever until the servers were shut
    # down first).
    out = tmp_path / "out"
    args = ["--budget", "6", "--validate-top", "1", "--validate-repetitions", "10", "--quiet"]
    assert main(["tune", str(TRITON_MATMUL), *args, "--tracking", "none", "--out", str(out)]) == 0
    block = json.loads((out / "validation.json").read_text())
    assert block["outcome"] in ("kept", "baseline") and len(block["candidates"]) == 1


def test_transfer_from_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["tune", str(EXAMPLE), "--out", str(tmp_path / "out"), "--transfer-from"]
    assert main([*args, str(tmp_path / "none")]) == 2
    assert "is not an evaluations table nor a folder" in capsys.readouterr().err
    assert main([*args, str(tmp_path), "--stages"]) == 2
    assert "`--transfer-from` starts one search" in capsys.readouterr().err


@needs_ptxas
@pytest.mark.slow
def test_tune_validates_a_timed_ptx_metric_through_ray(ray_cluster: None, tmp_path: Path) -> None:
    # compile_time_s is a timing, so `tune` re-measures the top 2 (fresh ptxas runs, no cache):
    # 40 runs, of a small kernel (tiny.ptx: 2 ms in ptxas, spill.ptx ~350 ms).
    text = EXAMPLE.read_text().replace("metric: spill_bytes", "metric: compile_time_s")
    description = tmp_path / "spill.yaml"
    description.write_text(text.replace("source: spill.ptx", f"source: {TINY_PTX}"))
    out = tmp_path / "out"
    args = ["--budget", "6", "--num-cpus", "2", "--tracking", "none", "--out", str(out)]
    args += ["--runtime", "ray"]
    assert (
        main(
            ["tune", str(description), *args, "--validate-top", "2", "--validate-repetitions", "5"]
        )
        == 0
    )
    written = out / "tiny.controls.yaml"  # named after its source
    data = yaml.safe_load(written.read_text())
    block = data["validation"]
    assert block["outcome"] in ("kept", "baseline") and block["top_k"] == 2
    # Only configurations the search saw faster than the baseline are re-measured (at most 2).
    table = pd.read_csv(out / "evaluations.csv").query("status == 'ok'")
    base = json.dumps(block["baseline_config"], sort_keys=True)
    reference = table.loc[table["config_json"] == base, "compile_time_s"].iloc[0]
    faster = int((table["compile_time_s"] < reference).sum())
    assert len(block["candidates"]) == min(2, faster)
    for candidate in block["candidates"]:
        assert candidate["candidate_config"] != block["baseline_config"]
        assert candidate["search_values"]["compile_time_s"] < reference
        assert candidate["verdict"] in ("KEPT", "REJECTED")
        assert candidate["baseline"]["n"] == candidate["candidate"]["n"] == 5
        # Bonferroni over the candidates re-measured
        assert candidate["config"]["alpha"] == pytest.approx(0.05 / len(block["candidates"]))
    expected = block["winner"]["candidate_config"] if block["winner"] else block["baseline_config"]
    assert {"controls": data["controls"]} == expected
    assert main(["apply", str(written)]) == 0
    assert main(["check", str(written), "--description", str(description)]) == 0


def test_a_cuda_search_without_a_gpu_is_refused_before_it_starts() -> None:
    from ciq_tune.errors import CiqTuneError
    from searchers.run.setup import require_gpu_for_cuda

    with pytest.raises(CiqTuneError, match="kind 'cuda' launches its kernel on a CUDA GPU"):
        require_gpu_for_cuda("cuda", 0)
    require_gpu_for_cuda("cuda", 1)
    require_gpu_for_cuda("ptx", 0)


def test_failure_summary_counts_each_status_and_keeps_its_first_cause() -> None:
    from searchers.run.outputs import failure_summary

    def record(status: str, error: str) -> Any:
        return SimpleNamespace(status=status, info={"error": error})

    records = [
        record("ok", ""),
        record("timeout", "run exceeded its timeout of 30.0 s"),
        record("compile_error", "ptxas info\nptxas fatal   : Missing .version directive"),
        record("timeout", "run exceeded its timeout of 31.0 s"),
    ]
    assert failure_summary(records) == (
        "3 of 4 failed: timeout 2 (first: run exceeded its timeout of 30.0 s); "
        "compile_error 1 (first: ptxas fatal   : Missing .version directive)"
    )
    assert failure_summary(records[:1]) == ""


def _bare_controls_file(tmp_path: Path, description: Path) -> Path:
    """A controls file of `description` with no controls (no ptxas needed to write it)."""
    from ciq_tune.controls import controls_file as cf
    from objectives import load_description

    desc = load_description(description)
    record = cf.build(
        kernel=cf.KernelInfo(
            name=desc.name,
            kind=desc.kind,
            source=str(desc.source),
            source_sha256=desc.source_sha256(),
            entry=desc.entry,
            arch=desc.arch,
        ),
        catalogs={},
        controls={},
        params={},
        benchmark=cf.Benchmark(metric=desc.metric, mode=desc.mode),
        scores=cf.Scores(baseline=2.0, best=1.0),
    )
    return cf.write(tmp_path / f"{desc.name}.controls.yaml", record)


def test_verify_rejects_a_ptx_controls_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _bare_controls_file(tmp_path, EXAMPLE)
    assert main(["verify", str(path), "--description", str(EXAMPLE)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "`kernel.kind` is 'ptx'" in err and "timed kind ['cuda', 'triton', 'helion']" in err


def test_verify_without_a_gpu_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    path = _bare_controls_file(tmp_path, TRITON_EXAMPLE)
    assert main(["verify", str(path), "--description", str(TRITON_EXAMPLE)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "needs a CUDA GPU" in err and "torch.cuda.is_available() is False" in err


def test_tune_prints_metrics_to_five_significant_digits() -> None:
    from searchers.run.outputs import _short

    assert _short(0.18612345678901) == "0.18612" and _short(2052) == "2052"
    assert _short(None) == "None"


@needs_ptxas
def test_tune_ships_a_timed_winner_without_the_controls_that_do_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ciq_tune.controls.simplify import simplify_timed
    from objectives import load_description
    from objectives import make_search_space
    from objectives import starting_points

    desc = load_description(EXAMPLE)
    points = starting_points(desc, make_search_space(desc))
    baseline, winner = points[0], points[1]  # opt_level 3 + allow_expensive_optimizations
    records = [
        EvaluationRecord(i, 0, c, (i,), str(i), "initial", "ok", {"spill_bytes": v}, 0.1)
        for i, (c, v) in enumerate([(baseline, 2052.0), (winner, 1556.0)])
    ]
    results = SearchResults([Objective(name="spill_bytes")], records)
    rng = np.random.default_rng(0)

    def measure(config: Any) -> float:  # only opt_level makes it faster (5 %)
        fast = config["controls"]["ptxas"].get("opt_level") == 3
        return (1.0 / 1.05 if fast else 1.0) * (1 + 0.005 * rng.normal())

    validation = validate_search(results, measure, baseline, k=1)
    simplified = simplify_timed(validation.winner.config, measure, settings=ValidationConfig())
    validation = validation.model_copy(update={"simplification": simplified})
    assert write_outputs(tmp_path, desc, results, None, points, validation) == 0
    data = yaml.safe_load((tmp_path / "spill.controls.yaml").read_text())
    assert data["controls"] == {"ptxas": {"opt_level": 3}}
    assert data["dropped_controls"] == {"ptxas": {"allow_expensive_optimizations": True}}
    kept = data["validation"]["simplification"]["kept"]["ptxas"]["opt_level"]
    assert kept["speedup_ci"][0] > 1.0
    assert "not faster beyond noise (ptxas.allow_expensive_optimizations)" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize("field", ["runtime", "benchmark", "tracking"])
def test_an_unknown_choice_from_python_is_refused_naming_its_option(field: str) -> None:
    from ciq_tune.errors import CiqTuneError
    from searchers.run.options import TuneOptions
    from searchers.run.options import check_options

    options = TuneOptions(descriptions=(Path("kernel.yaml"),), **{field: "bogus"})  # type: ignore[arg-type]
    with pytest.raises(CiqTuneError, match=rf"^`--{field}` must be one of .*, got 'bogus'$"):
        check_options(options)
