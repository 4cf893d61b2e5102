"""Campaigns: searches side by side on one Ray, faults kept to the search that has them."""

from __future__ import annotations

import csv
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from searchers.campaign import PROGRESS
from searchers.campaign import run_campaign
from searchers.campaign_progress import StoppingPoll
from searchers.campaign_specs import CampaignConfig
from searchers.campaign_specs import SearchSpec
from searchers.campaign_specs import expand_searches
from searchers.campaign_specs import search_names
from tests.searchers.sigint import sigint_when

ROOT = Path(__file__).resolve().parents[2]
SPILL = ROOT / "examples/kernels/ptx/spill.yaml"
FAULTS = "tests.searchers.campaign_faults"
UNREACHED_BUDGET = 2000


def scale_description(folder: Path, n: int = 256, **fields: Any) -> Path:
    """The tests' ``y = 2·x`` Triton kernel as a description at size `n` (`fields` replace
    its own, e.g. `params`), written to `folder`."""
    data = {
        "name": "scale",
        "kind": "triton",
        "source": str(ROOT / "tests/objectives/data/scale.py"),
        "entry": "scale_kernel",
        "metric": "time_ms",
        "sizes": {"n": n},
        "inputs": [{"name": "x", "shape": ["n"]}, {"name": "y", "shape": ["n"]}],
        "outputs": ["y"],
        "grid": "(ceil(n / BLOCK),)",
        "reference": "2.0 * x",
        "params": {"BLOCK": {"ordinal": [32, 64, 128, 256]}},
        **fields,
    }
    path = folder / "scale.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_search_names_are_unique_and_safe() -> None:
    specs = [SearchSpec(description=SPILL), SearchSpec(description=SPILL, name="a b")]
    assert search_names([*specs, SearchSpec(description=SPILL)]) == ["spill", "a_b", "spill-2"]


@pytest.mark.slow
def test_a_hung_and_a_crashing_search_leave_the_others_their_full_budgets(
    ray_cluster: None, tmp_path: Path
) -> None:
    searches = [
        SearchSpec(description=SPILL, budget=4, seed=0, name="good-a"),
        SearchSpec(description=SPILL, budget=4, seed=1, name="good-b"),
        SearchSpec(
            description=SPILL,
            budget=3,
            name="hangs",
            time_limit_s=20,
            objective=f"{FAULTS}:hanging",
        ),
        SearchSpec(description=SPILL, budget=3, name="crashes", objective=f"{FAULTS}:crashing"),
        SearchSpec(description=SPILL, budget=3, name="broken", objective=f"{FAULTS}:broken"),
    ]
    config = CampaignConfig(out=tmp_path, tracking="mlflow")
    rows = {r["name"]: r for r in run_campaign(searches, config)}
    for name in ("good-a", "good-b"):
        row = rows[name]
        assert row["status"] == "done" and row["evaluations"] == 4, row.get("error")
        assert rows[name]["ok"] == 4 and rows[name]["best"] <= rows[name]["baseline"]
        assert (tmp_path / name / "evaluations.csv").is_file()
    assert rows["hangs"]["status"] == "timeout" and "20" in rows["hangs"]["error"]
    # Every evaluation of the crashing search killed its trial's process: failures as data.
    assert rows["crashes"]["status"] == "done" and rows["crashes"]["ok"] == 0
    assert rows["crashes"]["evaluations"] == 3 and rows["crashes"]["error"]
    assert rows["good-a"]["error"] is None and json.loads(rows["good-a"]["statuses"]) == {"ok": 4}
    assert rows["broken"]["status"] == "crash" and "cannot be built" in rows["broken"]["error"]
    with (tmp_path / "campaign.csv").open() as handle:
        table = {r["name"]: r for r in csv.DictReader(handle)}
    assert set(table) == set(rows) and table["good-a"]["status"] == "done"
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["good-b"]["done"] == 4
    # The hung search's trial was ended by its own Tune driver: no placement group or actor of
    # the campaign keeps a CPU (a cancelled search task left one reserved until the driver exit).
    assert _all_cpus_free_within(CPUS_FREED_S)

    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("campaign")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], "tags.`ciq_tune.search` != ''")
    per_search = {
        r.data.tags["ciq_tune.search"] for r in runs if r.info.run_name.startswith("search:")
    }
    assert per_search == set(rows)


@pytest.mark.slow
def test_a_search_at_its_time_limit_is_stopped_and_frees_its_cpus(
    ray_cluster: None, tmp_path: Path
) -> None:
    hung = SearchSpec(
        description=SPILL, budget=3, name="hangs", time_limit_s=8, objective=f"{FAULTS}:hanging"
    )
    [row] = run_campaign([hung], CampaignConfig(out=tmp_path, tracking="none"))
    assert row["status"] == "timeout" and row["error"] == "stopped at its time limit of 8 s"
    # Cancelling the search's task instead left its trials' placement groups holding both CPUs.
    assert _all_cpus_free_within(CPUS_FREED_S)


# Seconds a finished search's CPUs may take to come back: about one when the machine is idle,
# more on a loaded 2-core one; a search that keeps them (a cancelled task's trials) never gives
# them back.
CPUS_FREED_S = 30.0


def _all_cpus_free_within(seconds: float) -> bool:
    import ray

    deadline = time.monotonic() + seconds
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.slow
def test_triton_searches_compile_in_trials_and_share_one_benchmark_server(
    ray_cluster: None, tmp_path: Path
) -> None:
    searches = [
        SearchSpec(description=scale_description(tmp_path), budget=3, name="scale-a"),
        SearchSpec(description=scale_description(tmp_path), budget=3, seed=1, name="scale-b"),
    ]
    config = CampaignConfig(out=tmp_path / "out", benchmark="per-gpu", tracking="none")
    rows = run_campaign(searches, config)
    assert [(r["status"], r["ok"]) for r in rows] == [("done", 3), ("done", 3)], rows
    # No GPU here: one server ran Triton's interpreter for every candidate of both searches
    # (and for the extra rounds that confirm a candidate within noise of the best).
    servers = json.loads((tmp_path / "out/benchmark_servers.json").read_text())
    assert len(servers) == 1 and servers[0]["served"] >= 6
    throughput = json.loads((tmp_path / "out/scale-a/throughput.json").read_text())
    assert throughput["evaluations"] == 3 and throughput["mean_s"]["compile_s"] > 0


@pytest.mark.slow
def test_a_matrix_in_a_campaign_is_one_search_timed_at_every_shape(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.objectives.data.row_scale_description import row_scale_description

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    shapes = [{"rows": 2, "n_cols": 16}, {"rows": 4, "n_cols": 64}, {"rows": 2, "n_cols": 256}]
    matrix = row_scale_description(tmp_path, shapes=shapes)
    config = CampaignConfig(out=tmp_path / "out", benchmark="per-gpu", tracking="none")
    (row,) = run_campaign(expand_searches([matrix], budget=3), config)
    assert (row["status"], row["ok"], row["metric"]) == ("done", 3, "time_ms_geomean"), row
    with (tmp_path / "out/row_scale/evaluations.csv").open() as handle:
        evaluations = list(csv.DictReader(handle))
    assert len(evaluations) == 3
    for evaluation in evaluations:
        times = [float(evaluation[f"time_ms@{i}"]) for i in range(3)]
        assert all(t > 0 for t in times)
        assert float(evaluation["time_ms_geomean"]) == pytest.approx(
            (times[0] * times[1] * times[2]) ** (1 / 3)
        )


def test_descriptions_times_shapes_give_one_search_per_shape() -> None:
    matrix = ROOT / "examples/kernels/triton/matmul_llm.yaml"
    every = expand_searches([matrix, SPILL], shapes=["all"], budget=5)
    from objectives import load_description

    shapes = load_description(matrix).matrix()
    assert len(every) == len(shapes) + 1 and every[0].shape == shapes[0].sizes
    assert every[0].name == f"{load_description(matrix).name}@{shapes[0].label()}"
    picked = expand_searches([matrix], shapes=[shapes[2].label()])
    assert [s.shape for s in picked] == [shapes[2].sizes]
    with pytest.raises(ValueError, match="match no shape"):
        expand_searches([matrix], shapes=["M=3"])
    # Without `shapes`, a matrix is one search, each evaluation at every shape.
    (whole,) = expand_searches([matrix])
    assert whole.shape is None and whole.name is None


@pytest.mark.slow
def test_ctrl_c_stops_every_search_keeps_their_evaluations_and_exits_130(
    ray_cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ciq_tune.cli import main

    out = tmp_path / "out"
    # Two PTX searches ran 300 evaluations each in 13 s on 2 cores (a warm compile cache): the
    # first progress report comes 10 s in and the stop (polled once a second) takes effect
    # ~2 s later, so `UNREACHED_BUDGET` cannot be outrun.
    budget = ["--budget", str(UNREACHED_BUDGET)]
    args = [*budget, "--num-cpus", "2", "--tracking", "none", "--out", str(out)]
    sent = sigint_when(lambda: _evaluations_done(out) > 0)
    assert main(["tune", str(SPILL), str(SPILL), *args]) == 130
    assert sent.is_set()
    printed = capsys.readouterr().out
    kept = re.search(r"interrupted: (\d+) evaluations \((\d+) ok\) written to", printed)
    assert kept is not None and "a campaign does not resume" in printed, printed
    with (out / "campaign.csv").open() as handle:
        table = {r["name"]: r for r in csv.DictReader(handle)}
    assert set(table) == {"spill", "spill-2"}
    assert {r["status"] for r in table.values()} == {"interrupted"}
    rows = 0
    for name, row in table.items():
        with (out / name / "evaluations.csv").open() as handle:
            written = sum(1 for _ in csv.DictReader(handle))
        assert written == int(row["evaluations"]) < UNREACHED_BUDGET
        rows += written
    assert 0 < int(kept.group(1)) == rows
    # The searches' trials ended with their Tune drivers: nothing keeps a CPU.
    assert _all_cpus_free_within(CPUS_FREED_S)
    assert main(["resume", str(out)]) == 2
    assert "a campaign does not resume" in capsys.readouterr().err


def _evaluations_done(out: Path) -> int:
    """Evaluations in the campaign's progress report (`PROGRESS`, rewritten every `_REPORT_S`
    while the searches run). Not the trials' result.json files: Tune copies those to the
    storage folder only when a search ends."""
    try:
        board = json.loads((out / PROGRESS).read_text())
    except (OSError, ValueError):  # not written yet, or caught half-written
        return 0
    return sum(row["done"] for row in board.values())


class _SlowBoard:
    """A progress board that answers `stopping` (yes) only `delay_s` after it started."""

    def __init__(self, delay_s: float) -> None:
        self._answers_at = time.monotonic() + delay_s

    def stopping(self) -> bool:
        time.sleep(max(0.0, self._answers_at - time.monotonic()))
        return True


def test_polling_for_a_stop_never_waits_for_the_board(ray_cluster: None) -> None:
    import ray

    board = ray.remote(_SlowBoard).options(num_cpus=0).remote(3.0)
    poll = StoppingPoll(board)
    answers: list[bool] = []
    deadline = time.monotonic() + 30.0
    while not any(answers) and time.monotonic() < deadline:
        answers.append(poll())
        time.sleep(0.2)
    # The stop arrives once the board answers, after polls that said "not yet" every 0.2 s
    # meanwhile: a blocking query would have waited out the board's 3 s in its first call.
    assert answers[-1] and not any(answers[:-1]) and len(answers) > 5
