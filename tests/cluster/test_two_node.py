"""A real two-node Ray cluster on this machine: a search runs on both nodes, the worker node is
killed part-way, and every evaluation is accounted for.

The nodes are `ray start --block` processes with their own --temp-dir; the search runs in a
driver process (`two_node_search.py`) connected with `ray.init(address=...)`. Token auth (on
by default in Ray 2.60) stays on, with a token made for this test. Only this test's processes
are stopped at the end (`ray stop` would stop every Ray on the machine).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.cluster.two_node_search import hold_file

pytestmark = [pytest.mark.slow, pytest.mark.ray]

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("two_node_search.py")
BUDGET = 16
# The worker node is held once this many evaluations have ended (some on each node) and killed
# while its next evaluation waits, so that one trial dies with the node.
KILL_AFTER = 8
SEARCH_TIMEOUT_S = 150
# A killed node is declared dead after about period × threshold (default 3 s × 5).
HEALTH_CHECK = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "3",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    """A `ray start --block` process and the temp dir that all processes of the node use."""

    role: str
    temp_dir: Path
    process: subprocess.Popen[bytes]
    log: Path

    def processes(self) -> list[psutil.Process]:
        """This node's processes: `ray start`, GCS, raylet, agents and workers.

        Found by the files under the node's temp dir that they name or hold open (their logs),
        not by process tree or command line alone: Ray retitles workers and agents
        (`ray::IDLE`), which also blanks their environment, starts workers in their own session,
        and agents outlive a killed raylet."""
        mark = str(self.temp_dir)
        found = []
        for proc in psutil.process_iter(["cmdline"], ad_value=None):
            try:
                named = any(mark in arg for arg in proc.info["cmdline"] or [])
                if named or any(f.path.startswith(mark) for f in proc.open_files()):
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return found

    def kill(self) -> int:
        """SIGKILL every process of the node at once (a machine dying); returns how many."""
        procs = self.processes()
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(procs, timeout=10)
        self.process.wait(timeout=10)
        return len(procs)

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Cluster:
    address: str
    env: dict[str, str]
    head: Node
    worker: Node


def _start_node(role: str, args: list[str], env: dict[str, str], root: Path) -> Node:
    temp_dir = root / role
    temp_dir.mkdir()
    log = root / f"{role}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ray.scripts.scripts",
                "start",
                "--block",
                "--disable-usage-stats",
                f"--temp-dir={temp_dir}",
                "--num-cpus=1",
                "--num-gpus=0",
                "--object-store-memory=100000000",
                f"--dashboard-agent-listen-port={_free_port()}",
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
    return Node(role, temp_dir, process, log)


def _client_server_port() -> list[str]:
    """A free port for the Ray Client server where ray[client] is installed (Ray would take
    10001, which another cluster may hold); none without it, as `ray start` then refuses one."""
    from ray._private.utils import get_ray_client_dependency_error

    if get_ray_client_dependency_error() is not None:
        return []
    return [f"--ray-client-server-port={_free_port()}"]


def _wait_for_port(port: int, node: Node, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if node.process.poll() is not None:
            raise RuntimeError(f"`ray start` for the {node.role} exited:\n{node.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(
        f"the {node.role}'s GCS port {port} did not open in {timeout_s:.0f} s:\n{node.log_tail()}"
    )


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    # A short root: Ray's unix sockets live under it and their paths are limited to 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="ciq2n-", dir="/tmp"))
    env = {
        **os.environ,
        **HEALTH_CHECK,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
    }
    port = _free_port()
    nodes: list[Node] = []
    try:
        head = _start_node(
            "head",
            [
                "--head",
                f"--port={port}",
                "--resources",
                '{"node_head": 1}',
                "--include-dashboard=false",
                f"--dashboard-port={_free_port()}",
                *_client_server_port(),
            ],
            env,
            root,
        )
        nodes.append(head)
        _wait_for_port(port, head, timeout_s=60)
        address = f"127.0.0.1:{port}"
        worker = _start_node(
            "worker", [f"--address={address}", "--resources", '{"node_worker": 1}'], env, root
        )
        nodes.append(worker)
        yield Cluster(address, env, head, worker)
    finally:
        for node in reversed(nodes):
            node.kill()
        leftover = [p.pid for node in nodes for p in node.processes()]
        shutil.rmtree(root, ignore_errors=True)
        assert not leftover, f"Ray processes left behind: {leftover}"


def _read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    # The last line may be half-written while trials run.
    return [json.loads(line) for line in lines if line.endswith("}")]


def _role_of_nodes(path: Path, driver: subprocess.Popen[str]) -> dict[str, str]:
    """Node id → "head"/"worker", as the driver wrote it once both nodes were up."""
    deadline = time.monotonic() + 90
    while not path.exists():
        if driver.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the driver never saw both nodes (exit code {driver.poll()})")
        time.sleep(0.1)
    roles: dict[str, str] = json.loads(path.read_text())
    return roles


def _in_flight(events: list[dict[str, Any]], node_id: str) -> list[str]:
    """Trials that started on `node_id` and did not end there."""
    ended = {e["trial_id"] for e in events if e["event"] == "end" and e["node_id"] == node_id}
    return [
        e["trial_id"]
        for e in events
        if e["event"] == "start" and e["node_id"] == node_id and e["trial_id"] not in ended
    ]


def _kill_worker_part_way(
    cluster: Cluster, driver: subprocess.Popen[str], events_path: Path, worker_id: str
) -> dict[str, Any]:
    """Wait for KILL_AFTER ended evaluations, some on each node, then hold the worker node's
    evaluations (`hold_file`) and kill the node once one of them says it is held: that one
    cannot end while the node's processes are found and killed (which took longer than an
    evaluation on a loaded machine). Returns when, and what was running there."""
    hold = hold_file(events_path, worker_id)
    deadline = time.monotonic() + SEARCH_TIMEOUT_S
    while time.monotonic() < deadline and driver.poll() is None:
        events = _read_events(events_path)
        ended = [e for e in events if e["event"] == "end"]
        if len(ended) >= KILL_AFTER and len({e["node_id"] for e in ended}) == 2:
            hold.touch()
        held = [e for e in events if e["event"] == "held" and e["node_id"] == worker_id]
        if held:
            killed_at = time.time()
            return {
                "killed_at": killed_at,
                "ended_before_kill": len(ended),
                "running_on_worker": _in_flight(events, worker_id),
                "processes_killed": cluster.worker.kill(),
            }
        time.sleep(0.05)
    raise AssertionError(
        f"the worker node was never killed: the driver exited ({driver.poll()}) or the search "
        f"stalled; last events: {_read_events(events_path)[-6:]}"
    )


def test_search_survives_losing_the_worker_node(cluster: Cluster, tmp_path: Path) -> None:
    events_path = tmp_path / "events.jsonl"
    summary_path = tmp_path / "summary.json"
    roles_path = tmp_path / "roles.json"
    t0 = time.monotonic()
    driver = subprocess.Popen(
        [
            sys.executable,
            str(DRIVER),
            f"--address={cluster.address}",
            "--nodes=2",
            f"--budget={BUDGET}",
            f"--roles={roles_path}",
            f"--events={events_path}",
            f"--summary={summary_path}",
            f"--storage={tmp_path / 'ray_results'}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cluster.env,
        cwd=ROOT,
    )
    try:
        roles = _role_of_nodes(roles_path, driver)
        worker_id = next(node for node, role in roles.items() if role == "worker")
        kill = _kill_worker_part_way(cluster, driver, events_path, worker_id)
        output, _ = driver.communicate(timeout=SEARCH_TIMEOUT_S)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 0, (
        f"the driver failed:\n{output[-6000:]}\nhead node:\n{cluster.head.log_tail()}\n"
        f"worker node:\n{cluster.worker.log_tail()}"
    )
    summary = json.loads(summary_path.read_text())
    events = _read_events(events_path)
    starts = [e for e in events if e["event"] == "start"]
    ends = [e for e in events if e["event"] == "end"]
    per_node = collections.Counter(roles[e["node_id"]] for e in ends)
    died = _in_flight(events, worker_id)
    print(
        f"two-node search: {per_node['head']} evaluations on the head, {per_node['worker']} on "
        f"the worker; worker killed after {kill['ended_before_kill']} ended evaluations, "
        f"{kill['killed_at'] - summary['search_t0']:.1f} s into the search, with trial(s) "
        f"{died} running there ({kill['processes_killed']} processes killed); Tune re-ran "
        f"{sorted(set(summary['recovered']))}; the searcher counted {len(summary['searcher'])} "
        f"of {BUDGET} evaluations; search {summary['search_s']:.1f} s, "
        f"driver start to end {time.monotonic() - t0:.1f} s"
    )

    # Both nodes evaluated, and the worker evaluated nothing after it was killed.
    assert per_node["head"] > 0 and per_node["worker"] > 0
    assert not [e for e in ends if e["node_id"] == worker_id and e["t"] > kill["killed_at"]]
    # The trial(s) running on the killed node were re-run by Tune and ended on the head.
    assert died and set(kill["running_on_worker"]) <= set(died)
    assert set(died) <= set(summary["recovered"])
    head_ends = {e["trial_id"] for e in ends if e["node_id"] != worker_id}
    assert set(died) <= head_ends
    assert summary["errored"] == []
    # The searcher counted each evaluation once: the budget, all ok, distinct configurations
    # and trials, and the same configurations as the completed evaluations.
    told = summary["searcher"]
    assert len(told) == BUDGET
    assert {r["status"] for r in told} == {"ok"}
    assert len({r["key"] for r in told}) == BUDGET
    assert len({r["trial_id"] for r in told}) == BUDGET
    assert collections.Counter(e["key"] for e in ends) == collections.Counter(
        r["key"] for r in told
    )
    # Only the evaluations that died with the node were started twice.
    assert len(starts) == BUDGET + len(died)
    grid = summary["grid"]
    assert len(grid) == BUDGET and all(r["error"] is None for r in grid)
    assert {r["key"] for r in grid} == {r["key"] for r in told}
