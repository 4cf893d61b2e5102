"""The cluster configurations parse, agree with each other and keep the dashboard private."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import ray
import yaml

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"


def _load(name: str) -> Any:
    return yaml.safe_load((CLUSTER / name).read_text())


def _dockerfile() -> str:
    return (CLUSTER / "Dockerfile").read_text()


def _dockerfile_arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)$", _dockerfile(), re.MULTILINE)
    assert match, f"cluster/Dockerfile has no `ARG {name}=...`"
    return match.group(1)


def test_ray_up_config_matches_the_autoscaler_schema() -> None:
    config = _load("aws-gpu.yaml")
    schema_path = Path(ray.__file__).parent / "autoscaler" / "ray-schema.json"
    jsonschema.validate(config, json.loads(schema_path.read_text()))
    assert config["head_node_type"] in config["available_node_types"]


def test_ray_up_config_has_gpu_workers_token_auth_and_a_private_dashboard() -> None:
    config = _load("aws-gpu.yaml")
    workers = {
        name: node
        for name, node in config["available_node_types"].items()
        if name != config["head_node_type"]
    }
    # g6: L4, p5: H100; every worker type is a GPU instance family that can autoscale.
    assert workers
    for node in workers.values():
        assert node["node_config"]["InstanceType"].split(".")[0] in {"g6", "g6e", "p5", "p5e"}
        assert node["max_workers"] >= 1
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start
    assert "RAY_AUTH_MODE=token" in " ".join(config["docker"]["run_options"])
    assert "~/.ray/auth_token" in config["file_mounts"]


def test_kuberay_cluster_has_a_gpu_worker_group_and_token_auth() -> None:
    cluster = _load("kuberay-gpu.yaml")
    assert (cluster["apiVersion"], cluster["kind"]) == ("ray.io/v1", "RayCluster")
    spec = cluster["spec"]
    assert spec["authOptions"]["mode"] == "token"
    assert spec["headGroupSpec"]["serviceType"] == "ClusterIP"
    assert spec["rayVersion"] == _dockerfile_arg("RAY_VERSION")
    groups = spec["workerGroupSpecs"]
    assert groups
    for group in groups:
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        for container in group["template"]["spec"]["containers"]:
            assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1


def test_every_node_runs_the_same_image() -> None:
    images = {_load("aws-gpu.yaml")["docker"]["image"]}
    spec = _load("kuberay-gpu.yaml")["spec"]
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        images |= {c["image"] for c in group["template"]["spec"]["containers"]}
    assert len(images) == 1, images


def test_dockerfile_copies_existing_paths_and_installs_defined_extras() -> None:
    text = _dockerfile()
    assert re.search(r"^FROM nvidia/cuda:13\.\d+\.\d+-devel-ubuntu24\.04$", text, re.MULTILINE)
    sources = [
        src
        for line in re.findall(r"^COPY (.+)$", text, re.MULTILINE)
        for src in line.split()[:-1]
        if not src.startswith("--")
    ]
    assert sources
    missing = [src for src in sources if not (ROOT / src).exists()]
    assert not missing, f"cluster/Dockerfile copies paths that do not exist: {missing}"
    extras = re.search(r'"\.\[([\w,]+)\]"', text)
    assert extras, "cluster/Dockerfile does not install the project with extras"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    defined = set(pyproject["project"]["optional-dependencies"])
    assert set(extras.group(1).split(",")) <= defined


def test_local_head_script_binds_the_dashboard_to_localhost() -> None:
    script = CLUSTER / "start-local-head.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    assert "--dashboard-host=127.0.0.1" in script.read_text()


@pytest.mark.parametrize(("visible", "offered"), [("2,3", 2), ("0", 1), ("", 0), ("1, 2,", 2)])
def test_local_head_script_offers_the_gpus_cuda_visible_devices_lists(
    visible: str, offered: int
) -> None:
    # `RAY=echo`: the script prints the `ray start` command it would run.
    env = {"PATH": "/usr/bin:/bin", "RAY": "echo", "CUDA_VISIBLE_DEVICES": visible}
    script = CLUSTER / "start-local-head.sh"
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"--num-gpus={offered} " in done.stdout
