"""Issue 12 must-show: what MLflow tracking costs the PTX demo, as the user sees it and on the
Tune loop.

    python -m bench.tracking_overhead --command [--rounds 5] [--cache warm|cold] [--budget 40]
    python -m bench.tracking_overhead [--budget 40] [--tracking mlflow] [--peer]

`--command` times the user's command, the README's demo (`ciq-tune tune
examples/kernels/ptx/spill.yaml --budget 40 --num-cpus 2 --out OUT`), with the default
tracking (MLflow) and with `--tracking none`, in interleaved rounds (the order alternates from
round to round, so a drift of the shared machine's load falls on both), each in a fresh output
folder. Per round: the two wall times and their ratio; overall: the median and the geometric
mean of the ratios, each with a bootstrap 95 % interval (`scipy.stats.bootstrap`), Ray's
"bottleneck" warnings, and a check that every row of the tracked run's evaluations.csv is a
FINISHED or FAILED MLflow run when the command has returned. `--cache warm` shares one compile
cache that a first, untimed command fills; `cold` gives every command an empty one (every
candidate runs ptxas).

Without `--command`:
Runs the PTX demo's search (examples/kernels/ptx/spill.yaml, 2 trials at a time on 2 CPUs)
with `searchers.tracking.tracking_callbacks` into a fresh sqlite store. Each tracking callback
is wrapped in a timer, so the time the Tune loop spends inside tracking hooks is measured
directly (the end-of-experiment flush included), not inferred from two noisy wall times. Prints
one JSON line: wall time of `fit()`, seconds inside tracking hooks, their share of the wall
time, the slowest hook call, and how many of Ray's "may be a performance bottleneck" warnings
were logged. `--peer` runs the search three times in one Ray session: without tracking (a
warm-up: the first search of a session starts Ray's workers, 12.4 s against 8.1-8.4 s after),
with tracking (the figures above), then without again (the peer); it adds the wall times and
the ratio to the peer, which also sees the writer process's CPU but carries the noise of two
runs on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
from ray import tune

from ciq_tune import CompileIQSearcher
from ciq_tune.tracking import TrackingConfig
from objectives import load_description
from objectives import make_search_space
from objectives import make_trainable
from objectives import starting_points
from searchers.tracking import tracking_callbacks

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kernels" / "ptx" / "spill.yaml"


class TimedCallback(tune.Callback):
    """Forwards every hook to `inner` and adds up the seconds spent in it."""

    IS_CALLBACK_CONTAINER = True

    def __init__(self, inner: tune.Callback) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.slowest = 0.0

    def _timed(self, hook: str, **info: Any) -> None:
        started = time.perf_counter()
        getattr(self.inner, hook)(**info)
        spent = time.perf_counter() - started
        self.seconds += spent
        self.slowest = max(self.slowest, spent)

    def setup(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("setup", **info)

    def on_step_begin(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_step_begin", **info)

    def on_step_end(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_step_end", **info)

    def on_trial_start(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_trial_start", **info)

    def on_trial_restore(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_trial_restore", **info)

    def on_trial_save(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_trial_save", **info)

    def on_trial_result(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_trial_result", **info)

    def on_trial_complete(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_trial_complete", **info)

    def on_trial_recover(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_trial_recover", **info)

    def on_trial_error(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_trial_error", **info)

    def on_checkpoint(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_checkpoint", **info)

    def on_experiment_end(self, **info: Any) -> None:  # type: ignore[override]
        self._timed("on_experiment_end", **info)


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "bottleneck" in record.getMessage():
            self.count += 1


def measure(budget: int, backend: str) -> dict[str, Any]:
    desc = load_description(EXAMPLE)
    space = make_search_space(desc)
    out = Path(tempfile.mkdtemp(prefix="ciq-tracking-"))
    timed = [
        TimedCallback(c)
        for c in tracking_callbacks(
            TrackingConfig(backend=backend),  # type: ignore[arg-type]
            run_dir=out,
            search_name=desc.name,
        )
    ]
    warnings = _Count()
    logging.getLogger("ray.tune.utils.util").addHandler(warnings)
    searcher = CompileIQSearcher(
        space=space,
        metric=desc.metric,
        mode=desc.mode,
        max_evaluations=budget,
        seed=0,
        points_to_evaluate=starting_points(desc, space),
    )
    started = time.perf_counter()
    grid = tune.Tuner(
        make_trainable(desc),
        tune_config=tune.TuneConfig(
            search_alg=searcher, num_samples=-1, max_concurrent_trials=2, reuse_actors=True
        ),
        run_config=tune.RunConfig(
            # Tune appends its own callbacks to the list it is given: pass a copy.
            name=desc.name,
            storage_path=str(out / "ray"),
            verbose=0,
            callbacks=list(timed),
        ),
    ).fit()
    wall = time.perf_counter() - started
    inside = sum(c.seconds for c in timed)
    return {
        "tracking": backend,
        "evaluations": len(grid),
        "wall_s": round(wall, 1),
        "tracking_hooks_s": round(inside, 2),
        "tracking_share_pct": round(100 * inside / wall, 2),
        "slowest_hook_s": round(max((c.slowest for c in timed), default=0.0), 3),
        "bottleneck_warnings": warnings.count,
        "store": str(out / "mlflow.db"),
    }


def run_command(tracking: str, budget: int, cache: Path, work: Path) -> dict[str, Any]:
    """The demo command once, as a user runs it, in a fresh output folder: its wall time, exit
    status, Ray's "bottleneck" warnings, and (tracked) evaluations.csv rows vs MLflow runs."""
    out = Path(tempfile.mkdtemp(prefix=f"{tracking}-", dir=work))
    command = [sys.executable, "-m", "ciq_tune.cli", "tune", str(EXAMPLE), "--budget", str(budget)]
    command += ["--num-cpus", "2", "--out", str(out), "--tracking", tracking]
    started = time.perf_counter()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "CIQ_TUNE_CACHE": str(cache)},
        timeout=900,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
    row: dict[str, Any] = {
        "tracking": tracking,
        "wall_s": round(wall, 2),
        "bottleneck_warnings": (done.stdout + done.stderr).count("bottleneck"),
    }
    if tracking == "mlflow":
        import pandas as pd

        from ciq_tune.tracking import sqlite_uri
        from ciq_tune.tracking import trial_runs

        evaluations = len(pd.read_csv(out / "evaluations.csv"))
        runs = trial_runs(sqlite_uri(out), "spill")
        ended = int(runs["status"].isin(["FINISHED", "FAILED"]).sum())
        row["evaluations"], row["mlflow_runs_ended"] = evaluations, ended
    return row


def compare_commands(rounds: int, budget: int, cache_mode: str) -> dict[str, Any]:
    """Interleaved rounds of the demo with MLflow and without tracking; the median wall ratio
    with a bootstrap 95 % interval."""
    import numpy as np
    from scipy import stats

    work = Path(tempfile.mkdtemp(prefix="ciq-tracking-command-"))
    shared_cache = work / "cache"
    if cache_mode == "warm":
        run_command("none", budget, shared_cache, work)  # fills the cache; not timed

    def cache() -> Path:
        return shared_cache if cache_mode == "warm" else Path(tempfile.mkdtemp(dir=work))

    pairs = []
    for index in range(rounds):
        order = ["mlflow", "none"] if index % 2 == 0 else ["none", "mlflow"]
        measured = {tracking: run_command(tracking, budget, cache(), work) for tracking in order}
        pair = {
            "round": index + 1,
            "first": order[0],
            "mlflow_wall_s": measured["mlflow"]["wall_s"],
            "none_wall_s": measured["none"]["wall_s"],
            "ratio": round(measured["mlflow"]["wall_s"] / measured["none"]["wall_s"], 3),
            "bottleneck_warnings": measured["mlflow"]["bottleneck_warnings"],
            "evaluations": measured["mlflow"]["evaluations"],
            "mlflow_runs_ended": measured["mlflow"]["mlflow_runs_ended"],
            "load_1min": round(os.getloadavg()[0], 1),
        }
        print(json.dumps(pair), flush=True)
        pairs.append(pair)
    ratios = np.array([p["ratio"] for p in pairs])

    def interval(statistic: Any) -> list[float]:
        found = stats.bootstrap(
            (ratios,), statistic, confidence_level=0.95, method="percentile", random_state=0
        ).confidence_interval
        return [round(float(found.low), 3), round(float(found.high), 3)]

    def geometric_mean(values: Any, axis: int = -1) -> Any:
        return np.exp(np.mean(np.log(values), axis=axis))

    return {
        "cache": cache_mode,
        "rounds": rounds,
        "median_ratio": round(float(np.median(ratios)), 3),
        "ratio_95_interval": interval(np.median),
        # The command run second in a round was the slower one in most rounds, whichever it
        # was; over an even number of rounds the orders balance in the geometric mean.
        "geometric_mean_ratio": round(float(geometric_mean(ratios)), 3),
        "geometric_mean_95_interval": interval(geometric_mean),
        "ratio_range": [float(ratios.min()), float(ratios.max())],
        "median_mlflow_wall_s": statistics.median(p["mlflow_wall_s"] for p in pairs),
        "median_none_wall_s": statistics.median(p["none_wall_s"] for p in pairs),
        "bottleneck_warnings": sum(p["bottleneck_warnings"] for p in pairs),
        "records_lost": sum(p["evaluations"] - p["mlflow_runs_ended"] for p in pairs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--tracking", choices=["mlflow", "log"], default="mlflow")
    parser.add_argument("--peer", action="store_true", help="also run without tracking")
    parser.add_argument("--command", action="store_true", help="time the user's command")
    parser.add_argument("--rounds", type=int, default=5, help="with --command")
    parser.add_argument("--cache", choices=["warm", "cold"], default="warm", help="with --command")
    args = parser.parse_args()
    if args.command:
        print(json.dumps(compare_commands(args.rounds, args.budget, args.cache)), flush=True)
        return
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        warmup = measure(args.budget, "none") if args.peer else None
        measured = measure(args.budget, args.tracking)
        if warmup is not None:
            peer = measure(args.budget, "none")
            measured["warmup_none_wall_s"] = warmup["wall_s"]
            measured["peer_none_wall_s"] = peer["wall_s"]
            measured["wall_ratio_to_peer"] = round(measured["wall_s"] / peer["wall_s"], 3)
        print(json.dumps(measured), flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
