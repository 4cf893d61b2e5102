"""Fault injection for `CompileIQSearcher` in real Ray Tune runs (the tests and `bench/` use it).

A toy objective (``x² + y``, minimised) misbehaves on a deterministic share of configurations
in one way a trainable can: it returns None, a dict without the metric, the metric as a string,
a bool or a list, NaN or -inf, raises, exits its process, hangs or leaks memory. Every wrong
value is *attractive* (it would be the best if it were accepted), so a search that accepts one
shows it. `run_faulty_search` runs a search through `tune.Tuner` with Tune's default settings
and checks the outcome against the healthy evaluations.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import ciq_tune.space as ss

if TYPE_CHECKING:
    from ray import tune

    from searchers.compileiq_searcher import CompileIQSearcher

FAULTS = (
    "none",
    "missing_metric",
    "str",
    "bool",
    "list",
    "nan",
    "inf",
    "exception",
    "crash",
    "hang",
    "leak",
)
"""Fault kinds; "hang" needs `isolated_trainable` (only a killable worker can stop it)."""
# Faults after which the evaluation must be a failure (a leak returns a healthy value).
_FAILING = frozenset(FAULTS) - {"leak"}
# Memory each "leak" trial keeps alive in its worker (bytes).
LEAK_BYTES = 200_000_000

SPACE = {"x": ss.range(-10.0, 10.0, 0.5), "y": ss.choice([1, 2, 3, 4, 5])}
"""41 × 5 = 205 configurations."""


def healthy_value(config: dict[str, Any]) -> float:
    """The toy objective (≥ 1; the optimum is x=0, y=1)."""
    return float(config["x"] ** 2 + config["y"])


def fault_of(config: dict[str, Any], fault: str | Sequence[str], rate: float) -> str | None:
    """The fault injected into `config` (deterministic in the config), or None."""
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).digest()
    if int.from_bytes(digest[:4], "big") / 2**32 >= rate:
        return None
    kinds = [fault] if isinstance(fault, str) else list(fault)
    return kinds[digest[4] % len(kinds)]


def make_faulty_trainable(
    fault: str | Sequence[str], rate: float, *, metrics: Sequence[str] = ("score",)
) -> Any:
    """A function trainable that injects `fault` (one kind, or a mix) into a share `rate` of
    configurations and returns `healthy_value` (per metric) otherwise."""
    kinds = [fault] if isinstance(fault, str) else list(fault)
    unknown = sorted(set(kinds) - set(FAULTS))
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {list(FAULTS)}")

    def trainable(config: dict[str, Any]) -> Any:
        kind = fault_of(config, kinds, rate)
        value = healthy_value(config)
        good = {m: value * (i + 1) for i, m in enumerate(metrics)}
        if kind is None:
            return good
        if kind == "leak":
            _LEAKED.append(bytearray(LEAK_BYTES))
            return {**good, "rss_mb": _rss_mb()}
        return _misbehave(kind, metrics)

    return trainable


_LEAKED: list[bytearray] = []


def _misbehave(kind: str, metrics: Sequence[str]) -> Any:
    attractive: dict[str, Any] = {
        "str": "-1000000",
        "bool": False,
        "list": [-1e6],
        "nan": math.nan,
        "inf": -math.inf,
    }
    if kind in attractive:
        return dict.fromkeys(metrics, attractive[kind])
    if kind == "none":
        return None
    if kind == "missing_metric":
        return {"other": -1e6}
    if kind == "exception":
        raise RuntimeError("injected fault: the kernel raised")
    if kind == "crash":
        os._exit(3)
    time.sleep(3600)  # "hang"
    return None


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return math.nan


@dataclass(frozen=True)
class FaultRun:
    """The settings of a fault-injected search that its summary reports (see
    `run_faulty_search`); `fault` is one kind, or the kinds of a mix joined by "+"."""

    fault: str
    rate: float
    objectives: int
    steady_state: bool
    isolated: bool
    budget: int

    @property
    def kinds(self) -> list[str]:
        return self.fault.split("+")


@dataclass(frozen=True)
class FaultRunSummary(FaultRun):
    """What a fault-injected search did, and the checks it must pass."""

    evaluations: int
    trials: int
    distinct_configs: int
    faulty: int
    wrong_values_accepted: int
    best: float | None
    healthy_best: float | None
    statuses: dict[str, int]
    wall_s: float
    max_failed_trial_s: float
    max_worker_rss_mb: float | None

    @property
    def lost(self) -> int:
        """Evaluations Tune ran that the searcher did not record (or the reverse)."""
        return abs(self.trials - self.evaluations) + max(0, self.budget - self.evaluations)

    @property
    def duplicated(self) -> int:
        return self.evaluations - self.distinct_configs

    def with_wall(self, wall_s: float) -> FaultRunSummary:
        return replace(self, wall_s=round(wall_s, 2))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lost": self.lost, "duplicated": self.duplicated}


def run_faulty_search(
    fault: str | Sequence[str],
    *,
    storage: str | Path,
    rate: float = 0.3,
    budget: int = 20,
    objectives: int = 1,
    steady_state: bool = True,
    isolated: bool = False,
    trial_timeout_s: float = 5.0,
    max_worker_rss_mb: float | None = None,
    max_concurrent_trials: int = 2,
    time_budget_s: float | None = None,
    reuse_actors: bool = False,
    seed: int = 0,
) -> FaultRunSummary:
    """Run one fault-injected search through `tune.Tuner` (Ray must be initialised).

    Args:
        fault: one kind of `FAULTS` or a list of them (mixed).
        storage: Tune's storage folder.
        rate: share of configurations with a fault.
        budget: the searcher's `max_evaluations`.
        objectives: 1 (screened GA) or 2 (NSGA-II).
        steady_state: steady-state proposals, or generations that wait for their last trial.
        isolated: wrap the trainable in `isolated_trainable` (needed for "hang").
        trial_timeout_s: the isolated trial's limit in seconds.
        max_worker_rss_mb: the isolated worker's memory limit (MiB).
        max_concurrent_trials: trials at a time.
        time_budget_s: the searcher's time budget (and the isolated trials'), in seconds;
            `budget` then only bounds the evaluations.
        reuse_actors: Tune's option (default off): on, one trial actor (and its isolated
            worker) serves many trials, so a leak accumulates and recycling shows.
        seed: the searcher's seed.
    """

    from searchers.compileiq_searcher import CompileIQSearcher
    from searchers.isolation import isolated_trainable

    metrics = ["score"] if objectives == 1 else [f"score{i}" for i in range(objectives)]
    trainable = make_faulty_trainable(fault, rate, metrics=metrics)
    if isolated:
        trainable = isolated_trainable(
            trainable,
            trial_timeout_s=trial_timeout_s,
            metric=metrics,
            time_budget_s=time_budget_s,
            max_worker_rss_mb=max_worker_rss_mb,
        )
    searcher = CompileIQSearcher(
        space=SPACE,
        metric=metrics[0] if objectives == 1 else metrics,
        mode="min",
        max_evaluations=budget,
        time_budget_s=time_budget_s,
        pool_size=4,
        engine_config={"steady_state": steady_state},
        seed=seed,
    )
    name = "faults-" + ("mixed" if not isinstance(fault, str) else fault)
    tuner = _tuner(trainable, searcher, storage, name, max_concurrent_trials, reuse_actors)
    start = time.perf_counter()
    grid = tuner.fit()
    wall = time.perf_counter() - start
    trial_metrics = [grid[i].metrics or {} for i in range(len(grid))]
    rss = [m["rss_mb"] for m in trial_metrics if "rss_mb" in m]
    run = FaultRun(
        fault=fault if isinstance(fault, str) else "+".join(fault),
        rate=rate,
        objectives=objectives,
        steady_state=steady_state,
        isolated=isolated,
        budget=budget,
    )
    return _summarise(run, searcher.results(), len(grid), rss).with_wall(wall)


def _tuner(
    trainable: Any,
    searcher: CompileIQSearcher,
    storage: str | Path,
    name: str,
    max_concurrent_trials: int,
    reuse_actors: bool,
) -> tune.Tuner:
    """A Tuner that runs `searcher`'s proposals (its budget ends the run) with `trainable`,
    `max_concurrent_trials` at a time, quietly, as experiment `name` under `storage`."""
    from ray import tune

    return tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            num_samples=-1,
            max_concurrent_trials=max_concurrent_trials,
            reuse_actors=reuse_actors,
        ),
        run_config=tune.RunConfig(storage_path=str(Path(storage).resolve()), name=name, verbose=0),
    )


def _summarise(run: FaultRun, results: Any, trials: int, rss: list[float]) -> FaultRunSummary:
    records = results.records
    faults = [fault_of(r.config, run.kinds, run.rate) for r in records]
    wrong = sum(1 for r, f in zip(records, faults, strict=True) if r.ok and f in _FAILING)
    healthy = [
        healthy_value(r.config) for r, f in zip(records, faults, strict=True) if f not in _FAILING
    ]
    ok = [r for r in records if r.ok]
    first = results.objectives[0].name
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    failed_s = [float(r.info.get("time_total_s", 0.0)) for r in records if not r.ok]
    return FaultRunSummary(
        **asdict(run),
        evaluations=len(records),
        trials=trials,
        distinct_configs=len({json.dumps(r.config, sort_keys=True) for r in records}),
        faulty=sum(1 for f in faults if f is not None),
        wrong_values_accepted=wrong,
        best=min(r.values[first] for r in ok) if ok else None,
        healthy_best=min(healthy) if healthy else None,
        statuses=statuses,
        wall_s=0.0,
        max_failed_trial_s=round(max(failed_s, default=0.0), 2),
        max_worker_rss_mb=round(max(rss), 1) if rss else None,
    )


def _logged_trainable(log: str, fault: Sequence[str], rate: float, pause_s: float) -> Any:
    """A faulty trainable that appends each config it evaluates to `log` (one JSON per line)."""
    inner = make_faulty_trainable(fault, rate)

    def trainable(config: dict[str, Any]) -> Any:
        time.sleep(pause_s)  # gives a kill something to interrupt
        with open(log, "a") as f:
            f.write(json.dumps(config, sort_keys=True) + "\n")
        return inner(config)

    return trainable


KILL_FAULTS = ("none", "str", "nan", "exception")
"""Faults the kill-and-restore run injects (at `rate`) while its driver is killed."""


def drive(storage: str, budget: int, *, restore: bool, rate: float = 0.3) -> dict[str, Any]:
    """One driver of the kill-and-restore check: start (or `restore`) a search under `storage`
    and return what it recorded. Run as ``python -m searchers.fault_injection``."""
    import ray
    from ray import tune

    from searchers.compileiq_searcher import CompileIQSearcher

    path = str(Path(storage).resolve() / "killed")
    trainable = _logged_trainable(str(Path(storage) / "evaluations.log"), KILL_FAULTS, rate, 0.3)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        if restore:
            grid = tune.Tuner.restore(path, trainable).fit()
        else:
            searcher = CompileIQSearcher(
                space=SPACE, metric="score", mode="min", max_evaluations=budget, seed=7
            )
            # Actors reused: one worker per slot, not per trial (~2 s of CPU each for 0.3 s of
            # work); the restored run keeps this setting.
            grid = _tuner(trainable, searcher, storage, "killed", 2, reuse_actors=True).fit()
        restored = CompileIQSearcher()
        restored.restore_from_dir(path)
        records = restored.results().records
    finally:
        ray.shutdown()
    faults = [fault_of(r.config, KILL_FAULTS, rate) for r in records]
    return {
        "trials": len(grid),
        "evaluations": len(records),
        "distinct_configs": len({json.dumps(r.config, sort_keys=True) for r in records}),
        "wrong_values_accepted": sum(
            1 for r, f in zip(records, faults, strict=True) if r.ok and f in _FAILING
        ),
    }


def kill_and_restore(storage: str | Path, *, budget: int, kill_after: int) -> dict[str, Any]:
    """Start a search in a driver process, SIGKILL the driver (and its process group) once
    `kill_after` evaluations are logged, restore it in a new driver and return its record plus
    ``executed`` (evaluations run, including Tune's re-runs of trials that were in flight or not
    yet checkpointed at the kill) and ``executed_distinct`` (distinct configurations run)."""
    import signal
    import subprocess
    import sys

    storage = Path(storage)
    storage.mkdir(parents=True, exist_ok=True)
    log = storage / "evaluations.log"
    command = [sys.executable, "-m", "searchers.fault_injection", str(storage), str(budget)]
    driver = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        while driver.poll() is None:
            done = len(log.read_text().splitlines()) if log.exists() else 0
            if done >= kill_after:
                break
            time.sleep(0.05)
        killed_at = len(log.read_text().splitlines()) if log.exists() else 0
        if driver.poll() is not None:
            raise RuntimeError(f"the driver ended (code {driver.returncode}) before the kill")
        os.killpg(driver.pid, signal.SIGKILL)
    finally:
        driver.wait()
    out = subprocess.run(
        [*command, "--restore"], check=True, capture_output=True, text=True, timeout=900
    ).stdout
    record: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    executed = log.read_text().splitlines()
    return {
        **record,
        "killed_at": killed_at,
        "executed": len(executed),
        "executed_distinct": len(set(executed)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m searchers.fault_injection STORAGE BUDGET [--restore]`` (see `drive`)."""
    import argparse

    parser = argparse.ArgumentParser(description=drive.__doc__)
    parser.add_argument("storage")
    parser.add_argument("budget", type=int)
    parser.add_argument("--restore", action="store_true")
    args = parser.parse_args(argv)
    print(json.dumps(drive(args.storage, args.budget, restore=args.restore)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
