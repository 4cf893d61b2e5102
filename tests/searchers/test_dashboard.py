"""The Ray dashboard path of docs/ray-tune.md: it starts with the `cluster` extra, answers 401
without Ray's token and 200 with it, and lists a search's trial actors."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

# The dashboard's own dependencies come with ray[default] (the `cluster` extra).
DASHBOARD_MODULES = ("aiohttp", "aiohttp_cors", "opencensus")
missing = [m for m in DASHBOARD_MODULES if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(missing), reason=f"the `cluster` extra (ray[default]) is not installed: {missing}"
    ),
]


def _get(url: str, token: str | None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


# Runs in its own interpreter: the dashboard needs a Ray of its own (the full tier's shared Ray
# starts without one), and this process's Ray must stay the shared one.
DASHBOARD_RUN = """
import json, subprocess, sys
import ray
from ray import tune
from ciq_tune import CompileIQSearcher

context = ray.init(num_cpus=2, include_dashboard=True, log_to_driver=False)
try:
    token = subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", "get-auth-token"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()

    def spill(config):
        return {"spill_bytes": config["x"]}

    tune.Tuner(
        spill,
        param_space={"x": tune.randint(0, 100)},
        tune_config=tune.TuneConfig(
            search_alg=CompileIQSearcher(seed=0), metric="spill_bytes", mode="min",
            num_samples=2, max_concurrent_trials=2,
        ),
        run_config=tune.RunConfig(storage_path=sys.argv[1], name="dash", verbose=0),
    ).fit()
    started = {"url": "http://" + context.dashboard_url, "token": token}
    print("DASHBOARD " + json.dumps(started), flush=True)
    sys.stdin.read()  # keep Ray and its dashboard up until the test has asked
finally:
    ray.shutdown()
"""


@pytest.mark.ray
def test_dashboard_needs_the_token_and_shows_the_trial_actors(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [sys.executable, "-c", DASHBOARD_RUN, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert run.stdout is not None
        # Tune prints its own lines to stdout too: the address is on the marked one.
        line = next((x for x in run.stdout if x.startswith("DASHBOARD ")), None)
        assert line, "the dashboard run ended before printing its address (see its stderr)"
        started = json.loads(line.removeprefix("DASHBOARD "))
        url, token = started["url"], started["token"]
        assert _get(f"{url}/api/v0/actors", None)[0] == 401
        status, body = _get(f"{url}/api/v0/actors?limit=1000", token)
        assert status == 200
        actors = json.loads(body)["data"]["result"]["result"]
        assert any(a.get("class_name") == "ImplicitFunc" for a in actors)
    finally:
        run.communicate(input="", timeout=120)
