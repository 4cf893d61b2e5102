"""A realistic finished run: a Triton-matmul-like search with failures, knockouts, generations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults

OBJECTIVES = [Objective(name="time_ms"), Objective(name="energy_mj")]


def synthetic_results(n: int = 80, seed: int = 0) -> SearchResults:
    """Evaluations whose time depends strongly on BM, somewhat on num_warps, not on `seed_pad`.

    Ten per generation; later generations sample near the best tile so the run converges.
    About 10 % fail to compile or time out (no values). Energy trades off against time through
    num_warps, so there is a real Pareto front.
    """
    rng = np.random.default_rng(seed)
    records = []
    for cid in range(n):
        generation = cid // 10
        late = generation >= 3
        bm = int(rng.choice([64, 128] if late else [32, 64, 128]))
        bn = int(rng.choice([32, 64, 128]))
        warps = int(rng.choice([4, 8]))
        fmad = bool(rng.random() < 0.5)
        config = {
            "tile": {"BM": bm, "BN": bn},
            "num_warps": warps,
            "seed_pad": int(rng.integers(0, 100)),
            "flags": ["--fmad=false"] if fmad else [],
        }
        if bm == 128:
            config["split"] = int(rng.integers(2, 9))
        time_ms = 0.2 * (128 / bm) ** 0.6 * (1.06 if warps == 4 else 1.0) * (0.98 if fmad else 1)
        time_ms *= 1 + 0.01 * rng.normal()
        energy = 30 * time_ms * (1.25 if warps == 8 else 1.0) * (1 + 0.02 * rng.normal())
        failed = rng.random() < 0.1
        records.append(
            EvaluationRecord(
                candidate_id=cid,
                generation=generation,
                config=config,
                genes=(bm, bn, warps),
                key=str(cid),
                origin="sampled",
                status=str(rng.choice(["compile_error", "timeout"])) if failed else "ok",
                values=None if failed else {"time_ms": time_ms, "energy_mj": energy},
                elapsed_s=float(rng.uniform(0.5, 2.0)),
            )
        )
    return SearchResults(OBJECTIVES, records)


def write_run(folder: Path, n: int = 80, seed: int = 0, fmt: str = "parquet") -> Path:
    """A run folder holding evaluations.<fmt>; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    results = synthetic_results(n, seed)
    if fmt == "parquet":
        results.to_parquet(folder / "evaluations.parquet")
    else:
        results.to_csv(folder / "evaluations.csv")
    return folder


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run")


@pytest.fixture
def table(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "evaluations.parquet")
