"""Campaigns: searches side by side on one Ray, faults kept to the search that has them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import ray

from searchers.campaign import CampaignConfig
from searchers.campaign import SearchSpec
from searchers.campaign import run_campaign
from searchers.campaign import search_names

ROOT = Path(__file__).resolve().parents[2]
SPILL = ROOT / "examples/kernels/ptx/spill.yaml"
FAULTS = "tests.searchers.campaign_faults"


@pytest.fixture(scope="module")
def ray_cpus():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_search_names_are_unique_and_safe():
    specs = [SearchSpec(description=SPILL), SearchSpec(description=SPILL, name="a b")]
    assert search_names([*specs, SearchSpec(description=SPILL)]) == ["spill", "a_b", "spill-2"]


def test_a_hung_and_a_crashing_search_leave_the_others_their_full_budgets(ray_cpus, tmp_path):
    searches = [
        SearchSpec(description=SPILL, budget=6, seed=0, name="good-a"),
        SearchSpec(description=SPILL, budget=6, seed=1, name="good-b"),
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
        assert rows[name]["status"] == "done" and rows[name]["evaluations"] == 6, rows[name]
        assert rows[name]["ok"] == 6 and rows[name]["best"] <= rows[name]["baseline"]
        assert (tmp_path / name / "evaluations.csv").is_file()
    assert rows["hangs"]["status"] == "timeout" and "20" in rows["hangs"]["error"]
    # Every evaluation of the crashing search killed its trial's process: failures as data.
    assert rows["crashes"]["status"] == "done" and rows["crashes"]["ok"] == 0
    assert rows["crashes"]["evaluations"] == 3
    assert rows["broken"]["status"] == "crash" and "cannot be built" in rows["broken"]["error"]
    with (tmp_path / "campaign.csv").open() as handle:
        table = {r["name"]: r for r in csv.DictReader(handle)}
    assert set(table) == set(rows) and table["good-a"]["status"] == "done"
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["good-b"]["done"] == 6

    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("campaign")
    runs = client.search_runs([experiment.experiment_id], "tags.`ciq_tune.search` != ''")
    per_search = {r.data.tags["ciq_tune.search"] for r in runs if r.info.run_name.startswith("search:")}
    assert per_search == set(rows)
