"""A campaign: many kernel searches at once on one Ray cluster, each with its own Tune driver.

Every search (a description, optionally at one shape) runs as its own Ray task, named
``search:<name>`` in the Ray dashboard, holding no CPU itself: its Tune driver places its
trials on the cluster's CPUs like any search, and staged kinds share one set of per-GPU
benchmark servers (`searchers.benchmark_pool`: each GPU's two benchmark workers, as
`ciq-tune tune` times on one machine; started first, warming up while the searches start), so
GPUs are shared through Ray's placement and no single driver bounds the campaign's evaluations
per second. A matrix's evaluation is one configuration compiled once per compile key and timed
at every shape in one request (`objectives.matrix`, `objectives.cutoffs`). A search that
crashes fails alone; one that reaches its time limit is stopped by its own Tune driver (its
trials ended, their resources freed, its evaluations kept), and one whose driver hangs past that
limit is cancelled; the others run to their full budgets. Stopping the campaign
(`run_campaign`'s `proceed`, a Ctrl+C of ``ciq-tune tune``) ends every search as Ctrl+C ends
one: the finished evaluations are kept and written, the trials in flight are dropped.

Outputs, in one folder: ``campaign.csv`` and ``campaign.json`` (one row per search: status,
evaluations, best and baseline values, evaluations/s), ``<name>/evaluations.csv`` per search,
``progress.json`` while it runs, and (with MLflow tracking) one MLflow experiment holding a run
per search and its trials.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import importlib
import json
import math
import time
from collections import Counter
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.stopper import TimeoutStopper

from ciq_tune.tracking import ARTIFACTS_DIR
from ciq_tune.tracking import TrackingConfig
from ciq_tune.tracking import ensure_experiment
from ciq_tune.tracking import sqlite_uri
from objectives import make_search_space
from objectives import starting_points
from objectives._stages import Benchmarker
from objectives.cutoffs import Cutoffs
from objectives.matrix import make_matrix_trainable
from objectives.matrix import matrix_metric
from searchers.benchmark_pool import BenchmarkPool
from searchers.campaign_progress import ProgressBoard
from searchers.campaign_progress import StoppingPoll
from searchers.campaign_progress import TrialProgress
from searchers.campaign_specs import CampaignConfig
from searchers.campaign_specs import SearchSpec
from searchers.campaign_specs import description_of
from searchers.campaign_specs import search_names
from searchers.interrupt import StopRequested
from searchers.kernel_search import kernel_trainable
from searchers.kernel_search import kernel_tuner
from searchers.kernel_search import logged_trainable
from searchers.kernel_search import placement_on_cluster
from searchers.kernel_search import start_benchmark_pool
from searchers.kernel_search import uses_benchmark_pool
from searchers.matrix_search import per_shape_values
from searchers.matrix_search import trial_metrics
from searchers.matrix_search import write_matrix_table
from searchers.placement import search_throughput
from searchers.plan import SearchPlan
from searchers.tracking import tracking_callbacks

TABLE = "campaign.csv"
"""The campaign's table of searches, in its output folder."""
PROGRESS = "progress.json"
"""Per-search progress, rewritten while the campaign runs."""
CANCEL_GRACE_S = 60.0
"""Seconds past its time limit before a search whose Tune driver did not stop is cancelled
(Tune starts the limit's clock once its setup is done and then stops the trials)."""
SEARCH_STATUSES = ("done", "crash", "timeout", "interrupted")
# Seconds between progress reports.
_REPORT_S = 10.0
# Seconds between checks for a stop request (by the campaign, and by each search's driver).
_POLL_S = 1.0
_TABLE_FIELDS = (
    "name",
    "description",
    "shape",
    "kind",
    "status",
    "budget",
    "evaluations",
    "ok",
    "metric",
    "baseline",
    "best",
    "improvement_pct",
    "wall_s",
    "evals_per_s",
    "best_config",
    "statuses",
    "error",
)


def _objective(
    spec: SearchSpec, name: str, desc: Any, benchmark: Benchmarker | None
) -> Callable[[dict[str, Any]], Any]:
    """The search's trainable, named after the search: Tune registers trainables by name for
    the whole Ray job, so two searches' trainables of one name would replace each other (and
    the dashboard shows trial actors by this name)."""
    if spec.objective is None and desc.shapes:
        # A matrix as `ciq-tune tune` searches one (`searchers.matrix_search.tune_matrix`):
        # each configuration compiled once per compile key, timed at every shape on a GPU's
        # benchmark server with each shape's round cut short far from its best time
        # (`objectives.cutoffs`), its value the shapes' geometric mean (no re-measurement of a
        # near-best value, which is a single shape's).
        timed = None if benchmark is None else Cutoffs(benchmark, desc)
        inner = make_matrix_trainable(
            desc, make_trainable=functools.partial(logged_trainable, benchmark=timed)
        )
    elif spec.objective is None:
        inner = kernel_trainable(desc, benchmark=benchmark)
    else:
        module, _, function = spec.objective.partition(":")
        factory: Callable[[Any], Any] = getattr(importlib.import_module(module), function)
        inner = factory(desc)
    named = functools.partial(_call, inner)
    named.__name__ = name  # type: ignore[attr-defined]
    return named


def _call(trainable: Callable[[dict[str, Any]], Any], config: dict[str, Any]) -> Any:
    return trainable(config)


def run_search(
    spec: SearchSpec,
    name: str,
    config: CampaignConfig,
    *,
    benchmark: Benchmarker | None,
    trials_at_a_time: int,
    progress: Any,
) -> dict[str, Any]:
    """One search of a campaign, to its budget (in the search's Ray task).

    Returns:
        The search's row of the campaign table (see `TABLE`).
    """
    task_started_at = time.time()
    desc = description_of(spec)
    # A matrix's configurations are those of its first shape (every shape's, but Helion's).
    at_first = desc.at_shape(desc.matrix()[0])
    space = make_search_space(at_first)
    points = starting_points(at_first, space)
    metric = matrix_metric(desc) if desc.shapes else desc.metric
    out = config.out.resolve()
    run_dir = out / name
    run_dir.mkdir(parents=True, exist_ok=True)
    placement = placement_on_cluster(desc.kind, config.trials_per_gpu, staged=benchmark is not None)
    # In-trial GPU searches are bounded by their GPU shares too.
    trials_at_a_time = min(trials_at_a_time, placement.max_concurrent_trials)
    placement = dataclasses.replace(placement, max_concurrent_trials=trials_at_a_time)
    tracking = TrackingConfig(backend=config.tracking, experiment_name=config.name)
    limit_s = _time_limit(spec, config)
    tuner, searcher = kernel_tuner(
        _objective(spec, name, desc, benchmark),
        placement,
        SearchPlan.of(
            desc, space, points, metric=metric, max_evaluations=spec.budget, seed=spec.seed
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=str(out / "ray"),
            verbose=0,
            # Tune ends the trials (a hung one too) and releases their placement groups; a
            # cancelled task would leave them reserved until the driver exits.
            stop=None if limit_s is None else TimeoutStopper(limit_s),
            callbacks=[
                *tracking_callbacks(tracking, run_dir=out, search_name=name),
                TrialProgress(progress, name, metric),
                StopRequested(StoppingPoll(progress), every_s=_POLL_S),
            ],
        ),
    )
    fit_started_at, started = time.time(), time.perf_counter()
    grid = tuner.fit()
    wall_s = time.perf_counter() - started
    results = searcher.results()
    if desc.shapes:
        shapes = per_shape_values(desc, results, trial_metrics(grid))
        write_matrix_table(run_dir / "evaluations.csv", desc, results, shapes)
    else:
        results.to_csv(run_dir / "evaluations.csv")
    trials = [grid[i].metrics or {} for i in range(len(grid))]
    summary = search_throughput(
        trials, wall_s=wall_s, gpus=placement.gpus, concurrency=trials_at_a_time
    )
    # When the search's task started and its Tune run began (`time.time`): its share of the
    # campaign's start.
    summary.update(task_started_at=task_started_at, fit_started_at=fit_started_at)
    (run_dir / "throughput.json").write_text(json.dumps(summary, indent=1, default=str))
    ok = [(r.config, r.values) for r in results.records if r.ok and r.values is not None]
    sign = 1 if desc.mode == "min" else -1
    best = min(ok, key=lambda cv: sign * cv[1][metric], default=None)
    base = next((v for c, v in ok if c == points[0]), None)
    row: dict[str, Any] = {
        "name": name,
        "description": str(spec.description),
        "shape": None if spec.shape is None else json.dumps(spec.shape),
        "kind": desc.kind,
        "status": _status(
            limit_s, wall_s, len(results.records), spec, ray.get(progress.stopping.remote())
        ),
        "budget": spec.budget,
        "evaluations": len(results.records),
        "ok": len(ok),
        "metric": metric,
        "baseline": None if base is None else base[metric],
        "best": None if best is None else best[1][metric],
        "wall_s": round(wall_s, 3),
        "evals_per_s": round(len(results.records) / wall_s, 4),
        "best_config": None if best is None else json.dumps(best[0], sort_keys=True),
        "statuses": json.dumps(dict(Counter(r.status for r in results.records))),
        "error": _first_error(results.records, trials),
    }
    if row["status"] == "timeout":
        stopped = f"stopped at its time limit of {limit_s:g} s"
        row["error"] = f"{stopped}; {row['error']}" if row["error"] else stopped
    if row["baseline"] and row["best"] is not None:
        row["improvement_pct"] = round(
            100.0 * sign * (row["baseline"] - row["best"]) / abs(row["baseline"]), 3
        )
    return row


def _time_limit(spec: SearchSpec, config: CampaignConfig) -> float | None:
    """The search's wall-clock limit in seconds: its own, else the campaign's (None: none)."""
    return spec.time_limit_s or config.search_timeout_s


def _status(
    limit_s: float | None, wall_s: float, evaluations: int, spec: SearchSpec, stopping: bool
) -> str:
    """``timeout`` when the search's `TimeoutStopper` ended it (past its limit, short of its
    budget: one that spent its budget just after the limit is done), ``interrupted`` when the
    campaign was stopped before the search spent its budget, else ``done``."""
    if evaluations >= spec.budget:
        return "done"
    if limit_s is not None and wall_s >= limit_s:
        return "timeout"
    return "interrupted" if stopping else "done"


def _first_error(records: Sequence[Any], trials: Sequence[dict[str, Any]]) -> str | None:
    """The first failed evaluation's error (a search whose every candidate fails says why in
    its row), or None when every evaluation was ``ok``."""
    if all(r.ok for r in records):
        return None
    for trial in trials:
        if trial.get("status") not in (None, "ok") and trial.get("error"):
            return f"{trial['status']}: {str(trial['error'])[:300]}"
    return next((r.status for r in records if not r.ok), None)


def run_campaign(
    searches: Sequence[SearchSpec],
    config: CampaignConfig,
    *,
    proceed: Callable[[], bool] | None = None,
    benchmark: BenchmarkPool | None = None,
) -> list[dict[str, Any]]:
    """Run `searches` at once on the connected Ray cluster and write the campaign's outputs.

    The staged searches' benchmark servers start first, one per GPU of the cluster
    (`searchers.benchmark_pool`), without waiting for them: their workers' imports and CUDA
    contexts overlap the searches' own start and first compiles.

    Args:
        searches: The searches (descriptions × shapes).
        config: Output folder, benchmark mode, tracking, per-search time limit.
        proceed: Asked every second while the searches run; False stops them all as Ctrl+C
            stops one search (their finished evaluations kept, rows ``interrupted``).
        benchmark: Benchmark servers the caller started (and stops) for the staged searches,
            in place of one per GPU started here.

    Returns:
        One row per search, in the order given (also written to ``OUT/campaign.csv``).

    Raises:
        ValueError: `searches` is empty, or its staged searches are of several kinds.
    """
    if not searches:
        raise ValueError("`searches` must hold at least one SearchSpec, got none")
    started_at = time.time()
    out = config.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    descs = [description_of(s) for s in searches]
    staged = [uses_benchmark_pool(d.kind, config.benchmark) for d in descs]
    kinds = {d.kind for d, s in zip(descs, staged, strict=True) if s}
    if len(kinds) > 1:
        raise ValueError(f"one benchmark pool serves one staged kind, got kinds {kinds}")
    pool = (benchmark or start_benchmark_pool(kinds.pop())) if kinds else None
    progress: Any = None
    # The board and the servers are this call's actors: they end with it, also on Ctrl+C (the
    # servers hold a GPU and a CPU each).
    try:
        names = search_names(searches)
        if config.tracking == "mlflow":
            # Created here, once: searches that each found no store would race to create it.
            ensure_experiment(sqlite_uri(out), config.name, out / ARTIFACTS_DIR)
        # Every CPU that no server holds compiles: the trial slots, shared by the searches.
        cpus = ray.cluster_resources().get("CPU", 1) - (pool.cpus if pool else 0)
        per_search = config.trials_per_search or max(1, math.ceil(int(cpus) / len(searches)))
        progress = (
            ray.remote(ProgressBoard)
            .options(num_cpus=0)
            .remote({n: d.mode for n, d in zip(names, descs, strict=True)})
        )
        task: Any = ray.remote(run_search)  # type: ignore[arg-type]
        refs = {
            task.options(name=f"search:{name}", num_cpus=0, max_retries=0).remote(
                spec,
                name,
                config,
                benchmark=pool if use_pool else None,
                trials_at_a_time=per_search,
                progress=progress,
            ): name
            for spec, name, use_pool in zip(searches, names, staged, strict=True)
        }
        submitted = time.perf_counter()
        rows = _collect(refs, searches, names, config, progress, proceed)
        timing = {
            "started_at": started_at,
            "searches_wall_s": time.perf_counter() - submitted,
            "evals_per_s_after_first": ray.get(progress.rate_after_first.remote()),
        }
        timing["first_result_at"], timing["last_result_at"] = ray.get(
            progress.result_window.remote()
        )
        (out / "campaign_timing.json").write_text(json.dumps(timing, indent=1))
        if pool is not None:
            (out / "benchmark_servers.json").write_text(json.dumps(pool.stats(), indent=1))
    finally:
        if progress is not None:
            ray.kill(progress)
        if pool is not None and pool is not benchmark:
            pool.shutdown()
    _write_table(out, rows)
    if config.tracking == "mlflow":
        _log_searches(out, config.name, rows)
    return rows


def _collect(
    refs: dict[Any, str],
    searches: Sequence[SearchSpec],
    names: list[str],
    config: CampaignConfig,
    progress: Any,
    proceed: Callable[[], bool] | None,
) -> list[dict[str, Any]]:
    """Wait for every search, report progress, stop them all once `proceed` says no, and
    cancel a search still running `CANCEL_GRACE_S` past its time limit (its driver hung: its
    own Tune stops it at the limit)."""
    started = time.monotonic()
    limits = {name: _time_limit(spec, config) for spec, name in zip(searches, names, strict=True)}
    by_name: dict[str, dict[str, Any]] = {}
    pending = dict(refs)
    last_report = started
    stopping = False
    while pending:
        if not stopping and proceed is not None and not proceed():
            stopping = True
            ray.get(progress.stop.remote())
            print("[campaign] stopping every search; their finished evaluations are kept")
        done, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_S)
        for ref in done:
            name = pending.pop(ref)
            try:
                by_name[name] = ray.get(ref)
            except Exception as exc:  # a search that crashed fails alone: its row says why
                by_name[name] = {"status": "crash", "error": f"{type(exc).__name__}: {exc}"[-2000:]}
        elapsed = time.monotonic() - started
        for ref, name in list(pending.items()):
            limit = limits[name]
            if limit is not None and elapsed > limit + CANCEL_GRACE_S:
                ray.cancel(ref, force=True, recursive=True)
                pending.pop(ref)
                by_name[name] = {
                    "status": "timeout",
                    "error": f"its driver did not stop at its time limit of {limit} s: "
                    f"cancelled {CANCEL_GRACE_S:g} s later (the trials' Ray placement groups "
                    "stay reserved until this process exits)",
                }
        now = time.monotonic()
        if now - last_report >= _REPORT_S or not pending:
            last_report = now
            _report(config.out.resolve(), ray.get(progress.snapshot.remote()), searches, names)
    board = ray.get(progress.snapshot.remote())
    rows = []
    for spec, name in zip(searches, names, strict=True):
        row = {"name": name, "description": str(spec.description), "budget": spec.budget}
        row.update(by_name[name])
        row.setdefault("evaluations", board[name]["done"])
        rows.append(row)
    return rows


def _report(
    out: Path, board: dict[str, dict[str, Any]], searches: Sequence[SearchSpec], names: list[str]
) -> None:
    (out / PROGRESS).write_text(json.dumps(board, indent=1))
    for spec, name in zip(searches, names, strict=True):
        row = board[name]
        print(
            f"[campaign] {name}: {row['done']}/{spec.budget} evaluations, {row['failed']} "
            f"failed, best {row['best']}",
            flush=True,
        )


def _write_table(out: Path, rows: list[dict[str, Any]]) -> None:
    with (out / TABLE).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=_TABLE_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (out / "campaign.json").write_text(json.dumps(rows, indent=1, default=str))


def _log_searches(out: Path, experiment: str, rows: list[dict[str, Any]]) -> None:
    """One MLflow run per search in the campaign's experiment: its row as params and metrics."""
    import mlflow

    uri = sqlite_uri(out)
    client = mlflow.MlflowClient(uri)
    experiment_id = ensure_experiment(uri, experiment, out / ARTIFACTS_DIR)
    for row in rows:
        run = client.create_run(
            experiment_id, run_name=f"search:{row['name']}", tags={"ciq_tune.search": row["name"]}
        )
        for key in ("description", "kind", "status", "budget", "metric", "best_config"):
            if row.get(key) is not None:
                client.log_param(run.info.run_id, key, str(row[key])[:500])
        for key in ("evaluations", "ok", "baseline", "best", "improvement_pct", "evals_per_s"):
            value = row.get(key)
            if isinstance(value, int | float) and math.isfinite(value):
                client.log_metric(run.info.run_id, key, float(value))
        client.set_terminated(run.info.run_id, "FINISHED" if row["status"] == "done" else "FAILED")
