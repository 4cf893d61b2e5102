"""A kernel search on this machine without Ray (`searchers.local_search`, `ciq-tune tune
--runtime local`): the engine's loop over threads, each evaluation in its own isolated worker."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

import ciq_tune.space as ss
from objectives import load_description
from objectives.matrix import descent_shapes
from searchers.local_search import config_key
from searchers.local_search import kernel_engine
from searchers.local_search import search_locally
from searchers.plan import SearchPlan
from searchers.run.setup import default_budget
from tests.objectives.data.row_scale_description import row_scale_description

LLM_MATRIX = Path(__file__).parents[2] / "examples/kernels/triton/matmul_llm.yaml"
SPACE = ss.SearchSpace({"x": ss.ordinal(list(range(20))), "y": ss.choice([1, 2, 3])})


def _engine(*, budget: int, seed: int, workers: int, points: list[dict] | None = None) -> Any:
    """A local search's engine over `SPACE`, minimising ``score``."""
    return kernel_engine(
        SearchPlan(SPACE, "score", "min", budget, seed, points or []), workers=workers
    )


def test_a_local_search_keeps_its_workers_busy_and_records_every_result() -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def trainable(config: dict) -> dict:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        if config["x"] == 13:
            raise RuntimeError("a bug in the objective")
        return {"status": "ok", "score": config["x"] + config["y"], "compile_s": 0.5}

    engine = _engine(budget=30, seed=0, workers=3, points=[{"x": 13, "y": 1}])
    search = search_locally(trainable, engine, metric="score", workers=3)
    records = search.results.records
    assert len(records) == 30 and len({config_key(r.config) for r in records}) == 30
    assert most == 3  # the engine proposes whenever a worker is free
    broken = next(r for r in records if r.config == {"x": 13, "y": 1})
    assert broken.status == "crash" and "RuntimeError: a bug" in broken.info["error"]
    assert all(r.ok == (r.config["x"] != 13) for r in records)
    assert all(r.info["compile_s"] == 0.5 for r in records if r.ok)
    assert len(search.rows) == 30 and search.workers == 3


def test_a_local_search_stops_when_told_and_keeps_what_ran() -> None:
    told: list[int] = []

    def trainable(config: dict) -> dict:
        return {"status": "ok", "score": float(config["x"])}

    search = search_locally(
        trainable,
        _engine(budget=30, seed=1, workers=2),
        metric="score",
        workers=2,
        on_result=lambda candidate, result: told.append(candidate.id),
        stop=lambda: len(told) >= 5,
    )
    assert 5 <= len(search.results.records) <= 6  # the one still running is kept
    assert sorted(told) == sorted(r.candidate_id for r in search.results.records)


def test_a_restored_search_evaluates_what_it_had_handed_out_then_goes_on(tmp_path: Path) -> None:
    from ciq_tune.engine import Engine

    def trainable(config: dict) -> dict:
        return {"status": "ok", "score": float(config["x"] + config["y"])}

    engine = _engine(budget=20, seed=2, workers=2)
    out_for_good = [engine.ask() for _ in range(3)]  # handed out, never told: a hard stop
    state = tmp_path / "state.json"
    search_locally(
        trainable, engine, metric="score", workers=2, stop=lambda: True, checkpoint=state
    )
    restored = Engine.from_state(json.loads(state.read_text()), space=SPACE)
    search = search_locally(trainable, restored, metric="score", workers=2, checkpoint=state)
    records = search.results.records
    assert len(records) == 20 and len({config_key(r.config) for r in records}) == 20
    handed_out = {config_key(c.config) for c in out_for_good if c is not None}
    assert handed_out <= {config_key(r.config) for r in records}
    assert json.loads(state.read_text())["pending"] == []


@pytest.mark.slow
def test_tune_runs_a_triton_matrix_locally_without_ray(tmp_path: Path) -> None:
    # Two shapes under Triton's interpreter, budget larger than the space: every configuration
    # once, validated on the benchmark worker that timed the search, and no Ray loaded.
    shapes = [{"rows": 2, "n_cols": 16}, {"rows": 4, "n_cols": 64, "weight": 2}]
    description = row_scale_description(tmp_path, shapes=shapes)
    out = tmp_path / "out"
    code = (
        "import sys; from ciq_tune.cli import main; "
        f"status = main(['tune', {str(description)!r}, '--budget', '40', '--num-cpus', '2', "
        f"'--validate-repetitions', '10', '--out', {str(out)!r}]); "
        "print('ray loaded:', 'ray' in sys.modules); sys.exit(status)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**_env(), "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "ray loaded: False" in done.stdout
    assert "placement: triton: 2 evaluation(s) at a time on this machine" in done.stdout
    assert "each at 2 shapes (L2 cold)" in done.stdout
    data = yaml.safe_load((out / "row_scale.controls.yaml").read_text())
    entries = data["matrix"]["entries"]
    assert len(entries) == 2 and all(e["evaluations"] == 18 for e in entries)  # 3 x 6 warps
    for entry in entries:
        validation = entry["validation"]
        assert validation["outcome"] in ("kept", "baseline")
        if validation["candidates"]:
            first = validation["candidates"][0]
            assert first["baseline"]["n"] >= 10  # rounds served by the benchmark worker
        else:  # under the interpreter all take about as long: the baseline may lead the search
            assert "no configuration beat the baseline" in validation["reason"]
    rows = (out / "evaluations.csv").read_text().splitlines()
    assert len(rows) == 19 and "time_ms@1" in rows[0]
    assert (out / "mlflow.db").exists()  # every evaluation tracked, without Tune


@pytest.mark.slow
def test_tune_of_one_shape_locally_writes_the_same_outputs(tmp_path: Path) -> None:
    description = row_scale_description(tmp_path, sizes={"rows": 4, "n_cols": 64})
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ciq_tune.cli", "tune", str(description)]
    command += ["--budget", "6", "--num-cpus", "2", "--tracking", "none", "--out", str(out)]
    done = subprocess.run(
        command, env={**_env(), "TRITON_INTERPRET": "1"}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "6 evaluations in" in done.stdout  # the throughput line
    assert "first result at " in done.stdout and "in the search (one round each, L2 cold)" in (
        done.stdout
    )
    data = yaml.safe_load((out / "row_scale.controls.yaml").read_text())
    assert data["benchmark"]["l2"] == "cold"
    assert data["validation"]["outcome"] == "skipped"  # no GPU: host timings are no claim
    evaluations = (out / "evaluations.csv").read_text().splitlines()
    assert len(evaluations) == 7
    settings = json.loads((out / "run.json").read_text())
    assert settings["runtime"] == "auto"


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}


@pytest.mark.slow
def test_ctrl_c_keeps_a_local_searchs_evaluations_and_exits_130(tmp_path: Path) -> None:
    import os
    import signal

    wide = {  # 125 configurations: the search is still running at its first result
        "params": {"BLOCK": {"ordinal": [8, 16, 32, 64, 128]}},
        "controls": {"triton": {"include": ["num_warps", "num_stages"]}},
    }
    description = row_scale_description(tmp_path, sizes={"rows": 4, "n_cols": 64}, **wide)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ciq_tune.cli", "tune", str(description), "--budget", "100"]
    command += ["--num-cpus", "2", "--tracking", "none", "--out", str(out)]
    proc = subprocess.Popen(
        command,
        env={**_env(), "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if " evaluations, best " in line:
            os.kill(proc.pid, signal.SIGINT)
            break
    rest = proc.communicate(timeout=300)[0]
    printed = "".join(lines) + rest
    assert proc.returncode == 130, printed
    assert "Traceback" not in printed
    kept = [line for line in printed.splitlines() if line.startswith("interrupted: ")]
    assert len(kept) == 1 and f"ciq-tune resume {out}" in kept[0]
    count = int(kept[0].split()[1])
    assert 0 < count < 100
    assert len((out / "evaluations.csv").read_text().splitlines()) == count + 1
    assert not (out / "row_scale.controls.yaml").exists()
    # The engine's state (JSON) lets `resume` finish it: the budget kept, nothing twice.
    resumed = subprocess.run(
        [sys.executable, "-m", "ciq_tune.cli", "resume", str(out), "--num-cpus", "2"],
        env={**_env(), "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    with (out / "evaluations.csv").open() as handle:
        configs = [row["config_json"] for row in csv.DictReader(handle)]
    assert len(configs) == len(set(configs)) == 100
    assert (out / "row_scale.controls.yaml").exists()


def test_a_per_shape_matrix_search_descends_per_shape_beside_its_strategy() -> None:
    desc = load_description(LLM_MATRIX)
    shapes = descent_shapes(desc)
    assert list(shapes) == [f"time_ms@{i}" for i in range(12)]
    assert list(shapes.values()) == [s.weight for s in desc.matrix()]
    plan = SearchPlan(SPACE, "score", "min", max_evaluations=10, seed=0)
    engine = kernel_engine(plan, workers=2, shapes=shapes)
    assert engine.shape_descent is not None and engine.shape_descent.keys == list(shapes)
    # A listing proposes every configuration anyway: no descent beside it.
    listing = replace(plan, max_evaluations=60, strategy="exhaustive")
    assert kernel_engine(listing, workers=2, shapes=shapes).shape_descent is None
    # Its default budget: 8 evaluations per shape; a description without shapes keeps 50.
    assert default_budget(desc) == 96
    assert default_budget(load_description(LLM_MATRIX.with_name("matmul.yaml"))) == 50
