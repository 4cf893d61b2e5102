"""The driver of the two-node test: a CompileIQSearcher search through Ray Tune on a running
cluster, with every trial's start and end logged from the node that ran it.

    python tests/cluster/two_node_search.py --address HOST:PORT --nodes 2 --budget 24 \
        --roles roles.json --events events.jsonl --summary summary.json --storage DIR

It runs in its own process because Ray reads RAY_AUTH_MODE/RAY_AUTH_TOKEN when it is imported:
the test's process cannot switch to the cluster's token after importing Ray.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path
from typing import Any

import ray
from ray import tune

import ciq_tune.space as ss
from searchers.compileiq_searcher import CompileIQSearcher

SPACE = {
    "x": ss.range(1.0, 20.0, 0.5),
    "y": ss.choice([1, 2, 3]),
    "z": ss.literal("flag", knockout_prob=0.5),
}
# Retries of a trial whose node died; one kill needs one, the rest absorbs trials that Ray
# placed on the dying node before the head noticed it was gone.
MAX_FAILURES = 3
# The longest an evaluation waits past its `eval_s` while its node is held (see `evaluate`).
HOLD_LIMIT_S = 120.0


def config_key(config: dict[str, Any]) -> str:
    """The identity of a configuration in the event log and the summary."""
    return json.dumps(config, sort_keys=True)


def _log_event(events: Path, **event: Any) -> None:
    # One short append per line: O_APPEND keeps lines whole across the nodes' processes.
    with open(events, "a") as f:
        f.write(json.dumps({**event, "t": time.time()}) + "\n")


def hold_file(events: Path, node_id: str) -> Path:
    """While this file exists, evaluations on node `node_id` do not end (the test kills the
    node then, and an evaluation must not end in the time the kill takes)."""
    return events.with_name(f"hold-{node_id}")


def evaluate(events: Path, eval_s: float, config: dict[str, Any]) -> dict[str, Any]:
    """The trainable: log the start, hold the node's CPU for `eval_s` (longer while the node is
    held), log the end."""
    node_id = ray.get_runtime_context().get_node_id()
    trial_id = tune.get_context().get_trial_id()
    key = config_key(config)
    _log_event(events, event="start", trial_id=trial_id, node_id=node_id, key=key)
    time.sleep(eval_s)
    if hold_file(events, node_id).exists():
        _log_event(events, event="held", trial_id=trial_id, node_id=node_id, key=key)
        hold_until = time.monotonic() + HOLD_LIMIT_S
        while hold_file(events, node_id).exists() and time.monotonic() < hold_until:
            time.sleep(0.05)
    score = config["x"] ** 2 + config["y"]
    _log_event(events, event="end", trial_id=trial_id, node_id=node_id, key=key)
    return {"score": score, "node_id": node_id}


class FailureLog(tune.Callback):
    """Trial ids Tune re-queued after a failure, and those that failed for good."""

    def __init__(self) -> None:
        self.recovered: list[str] = []
        self.errored: list[str] = []

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.recovered.append(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.errored.append(trial.trial_id)


def wait_for_nodes(count: int, timeout_s: float) -> dict[str, str]:
    """Node id → role ("head" or "worker", from the nodes' custom resources), once `count`
    nodes are alive."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [n for n in ray.nodes() if n["Alive"]]
        if len(alive) >= count:
            return {
                n["NodeID"]: "head" if "node_head" in n["Resources"] else "worker" for n in alive
            }
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{len(alive)} of {count} Ray nodes alive after {timeout_s:.0f} s; see the "
                "nodes' logs under their --temp-dir"
            )
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument(
        "--nodes", type=int, required=True, help="nodes to wait for (one CPU, one trial each)"
    )
    parser.add_argument("--budget", type=int, required=True, help="evaluations")
    parser.add_argument("--eval-s", type=float, default=0.5, help="seconds per evaluation")
    parser.add_argument("--roles", type=Path, required=True, help="node id → role, written first")
    parser.add_argument("--events", type=Path, required=True)
    parser.add_argument("--summary", type=Path, required=True)
    parser.add_argument("--storage", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    ray.init(address=args.address, log_to_driver=False)
    roles = wait_for_nodes(args.nodes, timeout_s=60)
    # Written whole, then renamed: the test reads it while this process runs.
    args.roles.with_suffix(".tmp").write_text(json.dumps(roles))
    args.roles.with_suffix(".tmp").replace(args.roles)
    searcher = CompileIQSearcher(
        space=SPACE, metric="score", mode="min", max_evaluations=args.budget, seed=args.seed
    )
    failures = FailureLog()
    t0 = time.time()
    grid = tune.Tuner(
        tune.with_resources(
            functools.partial(evaluate, args.events.resolve(), args.eval_s), {"cpu": 1}
        ),
        # One trial per node's CPU. Without max_concurrent_trials Tune keeps one trial pending
        # for a custom searcher, and the trials run one at a time. Actors are not reused: a
        # reused actor takes the next trial before a new one starts on the other node.
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            num_samples=-1,
            reuse_actors=False,
            max_concurrent_trials=args.nodes,
        ),
        run_config=tune.RunConfig(
            name="two_node",
            storage_path=str(args.storage.resolve()),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=MAX_FAILURES),
            callbacks=[failures],
        ),
    ).fit()
    summary = {
        "search_t0": t0,
        "search_s": time.time() - t0,
        "searcher": [
            {"trial_id": r.info.get("trial_id"), "key": config_key(r.config), "status": r.status}
            for r in searcher.results().records
        ],
        "grid": [
            {
                "key": config_key(grid[i].config or {}),
                "node_id": (grid[i].metrics or {}).get("node_id"),
                "error": None if grid[i].error is None else repr(grid[i].error),
            }
            for i in range(len(grid))  # ResultGrid is indexable, not typed as iterable
        ],
        "recovered": failures.recovered,
        "errored": failures.errored,
    }
    args.summary.write_text(json.dumps(summary, indent=1))
    ray.shutdown()


if __name__ == "__main__":
    main()
