"""Replay a recorded (brute-forced) tuning space: a tuner proposes, the record answers."""

from __future__ import annotations

import fnmatch
import functools
import gzip
import hashlib
import importlib.util
import json
import sys
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import ciq_tune.space as ss
from ciq_tune.errors import CiqTuneError
from ciq_tune.errors import ConstraintError
from ciq_tune.space import SearchSpace

# The benchdata folder beside the project checkout (read-only input, never copied in).
DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "benchdata"
# A restriction-free dataset whose Cartesian product is more than this many times the recorded
# configurations has an unknown space definition; its space is then the recorded configurations.
_UNKNOWN_SPACE_RATIO = 2


class BenchError(CiqTuneError, ValueError):
    """The benchmark was driven wrongly (unknown dataset, infeasible proposal, bad budget)."""


class BudgetExhausted(BenchError):
    """The run has made all the unique evaluations its budget allows."""


Key = tuple[Any, ...]


@functools.cache
def load_module(data: str | Path) -> ModuleType:
    """The `load.py` reader of a benchdata folder, imported from that folder (not copied).

    Args:
        data: the benchdata folder (datasets plus its `load.py`).
    """
    path = Path(data).resolve() / "load.py"
    if not path.is_file():
        raise BenchError(f"`--data` must be a benchdata folder with a load.py, got data={data!r}")
    name = "benchdata_load_" + hashlib.blake2b(str(path).encode(), digest_size=6).hexdigest()
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in load.py look their module up by name
    spec.loader.exec_module(module)
    return module


def list_datasets(data: str | Path, patterns: Iterable[str] = ()) -> list[str]:
    """Dataset paths (relative to `data`) registered by its load.py that match any glob, then
    the patterns that are files (spaces recorded by `bench.record_space`).

    Args:
        data: the benchdata folder.
        patterns: fnmatch globs such as ``"*kt_rtx/gemm/*"`` or file paths; all registered
            datasets when empty.
    """
    names = sorted(load_module(data).DATASETS)
    patterns = list(patterns)
    files = [p for p in patterns if Path(p).is_file()]
    globs = [p for p in patterns if p not in files]
    if not patterns:
        return names
    chosen = [n for n in names if any(fnmatch.fnmatch(n, p) for p in globs)]
    if globs and not chosen:
        raise BenchError(
            f"`--datasets` {globs!r} match no dataset of {data} and are not files; known: "
            f"{', '.join(names)}"
        )
    return chosen + files


def recorded_restrictions(path: str | Path) -> list[str]:
    """The ``restrictions`` a file of `bench.record_space` carries (the kernel description's
    constraints; a Kernel Tuner cache has no place for them)."""
    with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
        return list(json.load(f).get("restrictions", []))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Problem:
    """A recorded space ready to replay.

    Attributes:
        name: dataset path relative to the benchdata folder.
        params: tune parameter names, in the dataset's key order.
        space: the `SearchSpace` a tuner searches (ordinals for numbers, choices otherwise,
            the dataset's restrictions as constraints).
        feasible: every configuration a tuner may propose, as value tuples in `params` order.
        times: feasible key → recorded time in ms, None when it failed or was never measured.
        optimum: the best recorded time in ms.
    """

    name: str
    params: tuple[str, ...]
    space: SearchSpace
    feasible: tuple[Key, ...]
    times: Mapping[Key, float | None]
    optimum: float

    def key(self, config: Mapping[str, Any]) -> Key:
        """The value tuple of a flat configuration ``{param: value}``."""
        try:
            return tuple(config[p] for p in self.params)
        except KeyError as exc:
            raise BenchError(f"configuration {dict(config)!r} lacks parameter {exc}") from exc

    def config(self, key: Key) -> dict[str, Any]:
        return dict(zip(self.params, key, strict=True))

    def fraction(self, time: float | None) -> float:
        """Optimum / time (1 at the optimum, 0 for a failure)."""
        return 0.0 if time is None else self.optimum / time

    def fractions(self) -> np.ndarray:
        """The fraction of every feasible configuration (the random-search population)."""
        return np.array([self.fraction(self.times[k]) for k in self.feasible])

    def random_expected_evals(self, fraction: float) -> float:
        """Closed-form expected unique draws of random search to reach `fraction`: (N+1)/(m+1)."""
        m = int(np.sum(self.fractions() >= fraction))
        return (len(self.feasible) + 1) / (m + 1)


def _space(
    tune_params: Mapping[str, list[Any]], restrictions: list[str], recorded: set[Key] | None
) -> SearchSpace:
    spec: dict[str, Any] = {}
    for name, values in tune_params.items():
        if all(_is_number(v) for v in values):
            spec[name] = ss.ordinal(sorted(values))
        else:
            spec[name] = ss.choice(list(values))
    constraints: list[Any] = list(restrictions)
    if recorded is not None:
        names = tuple(tune_params)
        constraints.append(lambda flat: tuple(flat[n] for n in names) in recorded)
    try:
        return SearchSpace(spec, constraints=constraints)
    except ConstraintError as exc:
        raise BenchError(f"a dataset restriction is rejected by `Constraint`: {exc}") from exc


@functools.cache
def load_problem(data: str | Path, name: str) -> Problem:
    """Load dataset `name` through the folder's load.py and build its replay problem.

    The feasible set is the Cartesian product filtered by the dataset's restrictions. A dataset
    without restrictions whose Cartesian product is far larger than what was recorded has no
    known space definition; its feasible set is then the recorded configurations (as
    `Dataset.space_size` does), enforced by a callable constraint.

    Args:
        data: the benchdata folder.
        name: dataset path relative to `data`, or the path of a file recorded by
            `bench.record_space` (its restrictions are in the file).
    """
    loader = load_module(data)
    if Path(name).is_file():  # a space recorded by bench.record_space, read by the same load.py
        ds = loader.load(str(Path(name).resolve()), restrictions=recorded_restrictions(name))
    elif name not in loader.DATASETS:
        raise BenchError(
            f"dataset name={name!r} is neither registered in {data}/load.py nor a file"
        )
    else:
        ds = loader.load(name)
    params = tuple(ds.param_names)
    unknown_space = not ds.restrictions and (
        ds.cartesian_size() > _UNKNOWN_SPACE_RATIO * ds.n_configs
    )
    recorded = set(ds.table) if unknown_space else None
    space = _space(ds.tune_params, ds.restrictions, recorded)
    if recorded is not None:
        feasible = tuple(sorted(recorded, key=repr))
    else:
        feasible = tuple(tuple(c[p] for p in params) for c in ds.feasible_space())
    times = {k: ds.table.get(k) for k in feasible}
    valid = [t for t in times.values() if t is not None]
    if not valid:
        raise BenchError(f"dataset name={name!r} has no valid recorded time in its feasible set")
    return Problem(name, params, space, feasible, times, min(valid))


class Replay:
    """One tuning run against a recorded space, counting unique evaluations.

    Every unique feasible configuration costs one evaluation, a recorded failure or an
    unmeasured configuration included (it answers None). A repeated configuration answers from
    the record for free. An infeasible configuration is a harness error: every tuner must keep
    to the restricted space.

    Args:
        problem: the recorded space.
        budget: maximum number of unique evaluations.
    """

    def __init__(self, problem: Problem, budget: int) -> None:
        if not isinstance(budget, int) or budget < 1:
            raise BenchError(f"`budget` must be a positive integer, got budget={budget!r}")
        self.problem = problem
        self.budget = min(budget, len(problem.feasible))
        self.seen: dict[Key, float | None] = {}
        self.trace: list[float] = []  # best fraction after each unique evaluation
        self._best = 0.0

    @property
    def finished(self) -> bool:
        return len(self.seen) >= self.budget

    def evaluate(self, config: Mapping[str, Any]) -> float | None:
        """Recorded time in ms of `config` (flat ``{param: value}``), None when it failed."""
        key = self.problem.key(config)
        if key in self.seen:
            return self.seen[key]
        if key not in self.problem.times:
            raise BenchError(
                f"configuration {dict(config)!r} breaks the restrictions of {self.problem.name}; "
                "tuners may only propose feasible configurations"
            )
        if self.finished:
            raise BudgetExhausted(f"the budget of {self.budget} unique evaluations is spent")
        time = self.problem.times[key]
        self.seen[key] = time
        self._best = max(self._best, self.problem.fraction(time))
        self.trace.append(self._best)
        return time

    def is_new(self, config: Mapping[str, Any]) -> bool:
        return self.problem.key(config) not in self.seen


def best_fraction_trace(replay: Replay, length: int) -> list[float]:
    """The run's best-fraction trace padded to `length` with its last value (a run may stop
    early when the space is exhausted or a tuner gives up)."""
    trace = replay.trace[:length]
    last = trace[-1] if trace else 0.0
    return trace + [last] * (length - len(trace))
