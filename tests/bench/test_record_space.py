"""A recorded space is a Kernel Tuner cache that the replay harness reads back exactly."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import ciq_tune.space as ss
from bench.record_space import kernel_tuner_cache
from bench.replay import DEFAULT_DATA
from bench.replay import list_datasets
from bench.replay import load_problem
from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.space import SearchSpace


def _recorded(tmp_path: Path) -> tuple[Path, dict]:
    space = SearchSpace(
        {
            "params": {"BM": ss.ordinal([32, 64, 128]), "SPLIT": ss.choice([False, True])},
            "controls": {"triton": {"num_warps": ss.ordinal([4, 8])}},
        },
        constraints=["BM * num_warps <= 512"],
    )
    records = []
    for i, genes in enumerate(g for g in space.iter_genes() if space.is_feasible(g)):
        flat = space.flat(genes)
        failed = flat["params/BM"] == 128 and flat["params/SPLIT"]
        records.append(
            EvaluationRecord(
                candidate_id=i,
                generation=0,
                config=space.decode(genes),
                genes=genes,
                key=space.key(genes),
                origin="sampled",
                status="compile_error" if failed else "ok",
                values=None if failed else {"time_ms": flat["params/BM"] / 100 + i / 1000},
                elapsed_s=0.1,
                info={"error": "Traceback (most recent call last):\nptxas fatal: out of registers"}
                if failed
                else {},
            )
        )
    data = kernel_tuner_cache(
        space,
        SearchResults([Objective(name="time_ms")], records),
        "time_ms",
        {"restrictions": [c.rule for c in space.constraints]},
    )
    path = tmp_path / "recorded.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(data, f)
    return path, data


def test_every_evaluation_is_a_cache_entry_with_its_time_or_failure(tmp_path: Path) -> None:
    _, data = _recorded(tmp_path)
    assert data["tune_params_keys"] == ["BM", "SPLIT", "num_warps"]
    assert data["tune_params"] == {"BM": [32, 64, 128], "SPLIT": [False, True], "num_warps": [4, 8]}
    assert len(data["cache"]) == 10  # 12 combinations, 2 break BM * num_warps <= 512
    failed = data["cache"]["128,True,4"]
    assert failed["time"] == "CompileFailedConfig" and failed["ciq_status"] == "compile_error"
    assert failed["ciq_error"] == "ptxas fatal: out of registers"
    assert isinstance(data["cache"]["32,False,8"]["time"], float)


def test_the_replay_reads_a_recorded_file_with_its_restrictions(tmp_path: Path) -> None:
    if not (DEFAULT_DATA / "load.py").is_file():
        pytest.skip(f"the benchdata reader load.py is not at {DEFAULT_DATA}")
    path, data = _recorded(tmp_path)
    assert list_datasets(DEFAULT_DATA, [str(path)]) == [str(path)]
    problem = load_problem(DEFAULT_DATA, str(path))
    assert len(problem.feasible) == 10
    assert problem.times[(128, True, 4)] is None
    best = min(v["time"] for v in data["cache"].values() if isinstance(v["time"], float))
    assert problem.optimum == best
