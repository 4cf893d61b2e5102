"""False-accept and false-reject rates of `ciq_tune.validation` on synthetic or recorded noise.

Each trial re-measures a baseline and a candidate whose true ratio is known: 1.00 (the
candidate's "speedup" is only noise; KEPT is a false accept) or 1.03 (a real 3 % speedup;
REJECTED is a false reject). Synthetic noise models follow the H100 facts in docs/validation.md;
recorded noise replays GPU rounds: `bench.trust` re-measures each kernel's default configuration
twice, interleaved, so its pairs of rounds are pairs of identical configurations measured on one
GPU at one time (shared drift included). A replayed trial draws `repetitions` such pairs with
replacement; the 3 % case divides the candidate's rounds by 1.03.

    python -m bench.validation_power --trials 500 --out docs/validation_power.json
    python -m bench.validation_power --recorded docs/data/h200_trust/*.json --trials 1000

Interleaved comparisons run `ciq_tune.validation.validate`, the sequential comparison that
stops at its first deciding look; each row reports the mean timed rounds taken. `--repetitions`,
`--looks` (1: one test at the end) and `--futility` (with `--recorded`; 0: stop early only below
`--min-speedup`) each take a list of values, a row per combination (`--looks` and `--futility`
by default the validation's own).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from bench.script import script_parser
from ciq_tune.validation import ValidationConfig
from ciq_tune.validation import compare_samples
from ciq_tune.validation import validate

# Coefficient of variation of repeated do_bench(rep=50) of a Triton matmul on an H100.
H100_CV = 0.025
DEFAULTS = ValidationConfig()
TRUE_SPEEDUP = 1.03
BASE_MS = 0.2


@dataclass
class NoisyMachine:
    """A GPU whose every timed run shares one clock: slow drift, serial correlation, outliers.

    Attributes:
        cv: standard deviation of the independent part of the noise, relative.
        tails_df: degrees of freedom of a Student-t noise (heavy tails), None for normal.
        ar1: correlation of consecutive runs' noise (thermal/clock state), 0 for none.
        drift: relative change of every run's time from the first to the last call.
        calls: expected number of calls (to spread the drift over).
    """

    rng: np.random.Generator
    cv: float = H100_CV
    tails_df: float | None = None
    ar1: float = 0.0
    drift: float = 0.0
    calls: int = 70
    _t: int = 0
    _state: float = 0.0

    def timer(self, true_ms: float) -> Callable[[], float]:
        def run() -> float:
            if self.tails_df is None:
                eps = self.rng.normal()
            else:
                # Scaled to unit variance, so `cv` keeps its meaning.
                df = self.tails_df
                eps = self.rng.standard_t(df) * np.sqrt((df - 2) / df)
            # AR(1) with unit stationary variance: a run resembles the one before it.
            self._state = self.ar1 * self._state + np.sqrt(1 - self.ar1**2) * eps
            factor = 1 + self.drift * self._t / self.calls + self.cv * self._state
            self._t += 1
            return true_ms * factor

        return run


SCENARIOS: dict[str, dict[str, Any]] = {
    "normal": {},
    "student-t3": {"tails_df": 3.0},
    "ar1-0.5+drift-5%": {"ar1": 0.5, "drift": -0.05},
}


def trial(
    scenario: str, ratio: float, config: ValidationConfig, seed: int, interleaved: bool
) -> tuple[bool, int]:
    """One synthetic validation: whether the candidate is KEPT, and the timed rounds it took
    (interleaved: `ciq_tune.validation.validate`, stopping at the first look that decides)."""
    machine = NoisyMachine(
        np.random.default_rng(seed),
        calls=2 * (config.warmup + config.repetitions),
        **SCENARIOS[scenario],
    )
    base = machine.timer(BASE_MS)
    cand = machine.timer(BASE_MS / ratio)
    if interleaved:
        result = validate(base, cand, config=config)
        return result.kept, result.baseline.n
    else:
        # All of A, then all of B: what a naive re-measurement does.
        for _ in range(config.warmup):
            base()
        b = [base() for _ in range(config.repetitions)]
        for _ in range(config.warmup):
            cand()
        c = [cand() for _ in range(config.repetitions)]
    return compare_samples(b, c, config=config, measurement="samples").kept, config.repetitions


def recorded_pairs(paths: list[Path]) -> list[np.ndarray]:
    """Per kernel, the (rounds × 2) array of the default configuration's two interleaved copies
    in a `bench.trust` record."""
    pools = []
    for path in paths:
        variants = json.loads(path.read_text())["remeasure"]["variants"]
        a, b = variants["default"]["samples_ms"], variants["default_again"]["samples_ms"]
        pools.append(np.column_stack([a, b]).astype(float))
    return pools


def replay(pool: np.ndarray, ratio: float, config: ValidationConfig, seed: int) -> tuple[bool, int]:
    """One validation (`ciq_tune.validation.validate`, no warm-up: recorded rounds are warm)
    on recorded pairs of identical configurations: whether it was KEPT, and the rounds taken.

    A pool at least twice as long as `config.repetitions` gives a block of consecutive rounds at
    a random start (drift and serial correlation kept, no round used twice); a shorter pool is
    resampled with replacement, which repeats rounds and makes the tests overconfident, the
    more so the closer the repetitions come to the pool's length.
    """
    rng = np.random.default_rng(seed)
    n = config.repetitions
    if len(pool) >= 2 * n:
        start = int(rng.integers(0, len(pool) - n + 1))
        rows = pool[start : start + n]
    else:
        rows = pool[rng.integers(0, len(pool), size=n)]
    base, cand = iter(rows[:, 0].tolist()), iter((rows[:, 1] / ratio).tolist())
    result = validate(
        lambda: next(base), lambda: next(cand), config=config.model_copy(update={"warmup": 0})
    )
    return result.kept, result.baseline.n


def replay_rates(
    paths: list[Path],
    trials: int,
    repetitions: list[int],
    min_speedup: float = 1.0,
    looks: list[int] | None = None,
    futility: list[float] | None = None,
) -> list[dict[str, Any]]:
    """False-accept and false-reject rates and mean rounds per repetition count, number of
    looks and futility margin, trials spread over kernels."""
    pools = recorded_pairs(paths)
    rows = []
    cells = [
        (reps, n_looks, margin)
        for reps in repetitions
        for n_looks in looks or [DEFAULTS.looks]
        for margin in futility or [DEFAULTS.futility_margin]
    ]
    for reps, n_looks, margin in cells:
        config = ValidationConfig(
            repetitions=reps, min_speedup=min_speedup, looks=n_looks, futility_margin=margin
        )
        row: dict[str, Any] = {
            "scenario": "recorded",
            "repetitions": reps,
            "looks": len(config.look_rounds()),
            "futility_margin": margin,
            "min_speedup": min_speedup,
            "kernels": len(pools),
        }
        for label, ratio in (("false_accept", 1.0), ("false_reject", TRUE_SPEEDUP)):
            outcomes = [
                replay(pools[seed % len(pools)], ratio, config, seed) for seed in range(trials)
            ]
            kept = sum(k for k, _ in outcomes)
            row[label] = rate(kept if ratio == 1.0 else trials - kept, trials)
            row[f"{label}_mean_rounds"] = float(np.mean([n for _, n in outcomes]))
        cv = [float(np.std(np.log(p[:, 0] / p[:, 1]), ddof=1)) for p in pools]
        row["pair_log_ratio_sd"] = cv
        rows.append(row)
        print(f"recorded ({len(pools)} kernels) {_line(row)} min_speedup {min_speedup:g}")
    return rows


def _line(row: dict[str, Any]) -> str:
    """One printed row: rounds, looks, both error rates with their intervals, mean rounds."""
    fa, fr = row["false_accept"], row["false_reject"]
    return (
        f"n={row['repetitions']:3d} looks={row['looks']} futility "
        f"{row.get('futility_margin', 0):g}  false accept "
        f"{100 * fa['rate']:5.1f}% [{100 * fa['ci_low']:.1f}, {100 * fa['ci_high']:.1f}] "
        f"(mean rounds {row['false_accept_mean_rounds']:.1f})  false reject "
        f"{100 * fr['rate']:5.1f}% [{100 * fr['ci_low']:.1f}, {100 * fr['ci_high']:.1f}] "
        f"(mean rounds {row['false_reject_mean_rounds']:.1f})"
    )


def rate(hits: int, n: int) -> dict[str, float]:
    """Observed rate and its 95 % Clopper-Pearson interval."""
    ci = stats.binomtest(hits, n).proportion_ci(confidence_level=0.95, method="exact")
    return {"rate": hits / n, "ci_low": ci.low, "ci_high": ci.high}


def main(argv: list[str] | None = None) -> int:
    parser = script_parser("python -m bench.validation_power", __doc__)
    parser.add_argument("--trials", type=int, default=500, help="trials per cell")
    parser.add_argument("--repetitions", type=int, nargs="+", default=[10, 20, 30, 50])
    parser.add_argument("--looks", type=int, nargs="+", default=[DEFAULTS.looks])
    parser.add_argument("--futility", type=float, nargs="+", default=[DEFAULTS.futility_margin])
    parser.add_argument("--out", type=Path, help="write the table as JSON here")
    parser.add_argument(
        "--recorded",
        type=Path,
        nargs="+",
        help="replay the identical-configuration rounds of these bench.trust records instead",
    )
    parser.add_argument(
        "--min-speedup",
        type=float,
        default=DEFAULTS.min_speedup,
        help="the CI's lower bound must exceed this (with --recorded; default %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.recorded:
        rows = replay_rates(
            args.recorded,
            args.trials,
            args.repetitions,
            args.min_speedup,
            args.looks,
            args.futility,
        )
        if args.out is not None:
            payload = {
                "trials": args.trials,
                "true_speedup": TRUE_SPEEDUP,
                "recorded": [str(p) for p in args.recorded],
                "rows": rows,
            }
            args.out.write_text(json.dumps(payload, indent=2) + "\n")
        return 0
    cells = [("normal", reps, n, True) for reps in args.repetitions for n in args.looks]
    default_reps = DEFAULTS.repetitions
    cells += [
        (name, default_reps, n, True) for name in SCENARIOS if name != "normal" for n in args.looks
    ]
    cells += [("ar1-0.5+drift-5%", default_reps, 1, False)]
    rows = []
    start = time.perf_counter()
    for scenario, reps, n_looks, interleaved in cells:
        config = ValidationConfig(repetitions=reps, looks=n_looks)
        row: dict[str, Any] = {
            "scenario": scenario,
            "order": "ABAB" if interleaved else "AA..BB",
            "repetitions": reps,
            "looks": len(config.look_rounds()) if interleaved else 1,
        }
        for label, ratio in (("false_accept", 1.0), ("false_reject", TRUE_SPEEDUP)):
            outcomes = [
                trial(scenario, ratio, config, seed, interleaved) for seed in range(args.trials)
            ]
            kept = sum(k for k, _ in outcomes)
            row[label] = rate(kept if ratio == 1.0 else args.trials - kept, args.trials)
            row[f"{label}_mean_rounds"] = float(np.mean([n for _, n in outcomes]))
        rows.append(row)
        print(f"{scenario:18s} {row['order']:7s} {_line(row)}", flush=True)
    elapsed = time.perf_counter() - start
    print(f"{args.trials} trials per cell, {elapsed:.0f} s")
    if args.out is not None:
        payload = {"trials": args.trials, "true_speedup": TRUE_SPEEDUP, "cv": H100_CV, "rows": rows}
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
