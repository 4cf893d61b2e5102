"""The Gaussian-process ranking of the screened search: where the feasible configurations can be
listed, each pick is the never-proposed listed configuration of highest expected improvement
(Jones et al., J. Global Optim. 1998) under a Gaussian process fitted to the evaluations
(`engine/gaussian_process.py`), the whole listed space ranked as in Kernel Tuner (Willemsen et
al., PMBS 2021), each pick believed at its predicted value before the next (the kriging
believer, Ginsbourger et al. 2010); the last picks of a generation stay within
`LOCAL_CHANGES` parameters of the best. Also the split of the evaluations into good and the
rest that the ranking and the Parzen screening share (`_split`)."""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np

from ciq_tune.engine.ga import GA
from ciq_tune.engine.gaussian_process import GaussianProcess
from ciq_tune.engine.gaussian_process import ListedProcess
from ciq_tune.engine.gaussian_process import expected_improvement
from ciq_tune.engine.gaussian_process import fitted_hyperparameters
from ciq_tune.engine.proposals import Candidate
from ciq_tune.engine.screened_config import ScreenedGAConfig
from ciq_tune.errors import EngineError
from ciq_tune.results import EvaluationRecord
from ciq_tune.space.space import MAX_ENUMERATION
from ciq_tune.space.space import Genes

# Most feasible configurations a space may list for the Gaussian-process ranking (the kt_rtx
# GEMM space lists 17 956: `ListedProcess` ranks all of them for ~10 ms of one CPU core per
# evaluation at 800-900 evaluations, 29 s in all to 1,000 with the length scales' refits,
# bench/engine_pace.py; a process rebuilt for each pick took ~0.15 s per pick at 100
# evaluations and ~0.4 s at 250).
MAX_LISTED = 50_000
# Per-parameter length scales are refitted every generation up to this many evaluations, then
# once the evaluations have grown by this factor, and not after `SCALES_REFIT_UNTIL`
# evaluations. A fit's L-BFGS steps cost ~n^3 each, and new scales re-condition the process
# over every listed row, ~n^2 N (N listed rows): at 931 evaluations of an 11,130-row space a
# refit cost seconds, the engine's pace otherwise ~5 ms a suggestion (bench/engine_pace.py).
SCALES_REFIT_EVERY_GENERATION = 100
SCALES_REFIT_GROWTH = 1.25
SCALES_REFIT_UNTIL = 400
# A local pick (`local_picks`) changes at most this many parameters of the best configuration.
LOCAL_CHANGES = 2
# An expected improvement within this share of the highest ties with it within rounding
# (`_exact_process`): `ListedProcess`'s and `GaussianProcess`'s differ by at most 1.3e-10 of
# the highest on the replays and the battery's categorical space.
TIE_SHARE = 1e-6
# `_ranked_successes`' cache: the records it has seen, how many, them ranked, their values.
_Ranked = tuple[list[EvaluationRecord], int, list[EvaluationRecord], list[float]]


def _near_tie(gain: np.ndarray, pick: int) -> bool:
    """Whether another value of `gain` is within rounding of its highest, `gain[pick]`."""
    if len(gain) < 2:
        return False
    top = float(gain[pick])
    return top - float(np.partition(gain, -2)[-2]) <= TIE_SHARE * abs(top)


class ProcessRankedGA(GA):
    """The GA with the Gaussian-process ranking of a listed space; `ScreenedGA` builds on it."""

    # The fitted length scales and noise in use, and how many evaluations they fit (set on the
    # first fit or from a saved state: `ScreenedGA._load_strategy_state`).
    _scales: np.ndarray | None
    _scales_at: int
    _noise: float

    def _ranks_by_process(self) -> bool:
        """Whether the Gaussian process ranks (`ranking`), listing the space on first use."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        if config.ranking == "parzen":
            return False
        if config.ranking == "auto" and any(o == "transfer" for _, o in self._warm_start):
            # From an earlier search's best, the ratio's pattern moves around them got there
            # sooner (kt_rtx GEMM, 30 seeds: 36 evaluations to 95 % vs 46.5; transfer's
            # choosing set, convolution_milo: 87.5 vs over 250; docs/benchmarks.md,
            # "Replays of recorded spaces").
            return False
        if getattr(self, "_listed", None) is None:
            self._listed = self._list_space(config.ranking == "auto")
        return bool(self._listed)

    def _list_space(self, only_short_lists: bool) -> list[Genes]:
        """Every feasible configuration, or none where `auto` keeps the ratio (a wide
        parameter, or more than `MAX_LISTED` feasible configurations)."""
        if only_short_lists and (
            self._wide() or (not self.space.constraints and self.space.cardinality() > MAX_LISTED)
        ):
            return []
        if self.space.cardinality() > MAX_ENUMERATION:
            if not only_short_lists:
                raise EngineError(
                    f"ranking='gaussian_process' lists the space, which has "
                    f"{self.space.cardinality():.3g} combinations, more than {MAX_ENUMERATION}"
                )
            return []
        listed = list(self.space.iter_genes())
        if len(listed) > MAX_LISTED:
            if not only_short_lists:
                raise EngineError(
                    f"ranking='gaussian_process' ranks at most {MAX_LISTED} feasible "
                    f"configurations, the space has {len(listed)}"
                )
            return []
        self._listed_X = self._process_features(listed)
        self._listed_genes = np.array([list(g) for g in listed], dtype=object)
        self._listed_index = {tuple(g): i for i, g in enumerate(listed)}
        return listed

    def _expected_improvement_picks(self, n: int) -> list[Candidate]:
        """`n` never-proposed configurations of the listed space, each the one of highest
        expected improvement under a Gaussian process fitted to the evaluations (log values
        when all are positive; failures at the worst value) and to the candidates out or picked
        before it, at their predicted values (the kriging believer, Ginsbourger et al.,
        "Kriging is well-suited to parallelize optimization", 2010). The last `local_picks`
        choose only among configurations near the best (`LOCAL_CHANGES`): over the whole space
        the highest expected improvement near the optimum goes to configurations that change
        many parameters at once, as the process cannot resolve a few per cent there.

        The process is `ListedProcess`, `GaussianProcess` kept from one generation to the next
        over the listed rows (the same predictions, up to rounding, for O(n N) per pick where
        a process rebuilt for each costs O(n^2 N))."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        ok = [r for r in self._records if r.ok]
        if n <= 0 or len(ok) < 2:
            return []
        values = np.array([self._value(r) for r in ok])
        if np.all(values > 0):
            values = np.log(values)
        failed = [r for r in self._records if not r.ok]
        y = np.concatenate([values, np.full(len(failed), values.max())])
        believed = [*self._pending.values(), *self._queue]
        fresh = np.ones(len(self._listed), dtype=bool)
        for g in [*(r.genes for r in self._records), *(c.genes for c in believed)]:
            i = self._listed_index.get(tuple(g))
            if i is not None:
                fresh[i] = False
        near = self._near(self._split()[0][0].genes)
        n_local = config.local_picks
        if config.steady_state:  # one pick at a time: local at the generational share
            n_local = int(self.rng.random() < config.local_picks / config.pool_size)
        process = self._listed_process(ok, failed, values, y)
        if believed:
            B = self._process_features([c.genes for c in believed])
            listed = [self._listed_index.get(tuple(c.genes), -1) for c in believed]
            process.believe_all([c.key for c in believed], B, process.predict_points(B), listed)
        near_rows = np.flatnonzero(near)
        exact: GaussianProcess | None = None  # `GaussianProcess` itself, from a near tie on
        picked: list[tuple[np.ndarray, int, int | None]] = []
        out: list[Candidate] = []
        while len(out) < n and fresh.any():
            local = len(out) >= n - n_local and bool((fresh & near).any())
            rows = np.flatnonzero(fresh & near if local else fresh)
            if exact is None:
                mean, sd = process.predict(rows)
                gain = expected_improvement(mean, sd, process.best)
                pick = int(np.argmax(gain))
                if _near_tie(gain, pick):
                    exact = self._exact_process(ok, failed, y, believed, picked)
            if exact is not None:
                mean, sd = exact.predict(self._listed_X[rows])
                pick = int(np.argmax(expected_improvement(mean, sd, exact.best)))
            row = int(rows[pick])
            fresh[row] = False
            candidate = self._make_candidate(self._listed[row], "offspring")
            picked.append((rows, pick, None if candidate is None else row))
            if candidate is None:
                continue
            out.append(candidate)
            if len(out) == n or not fresh.any():  # no pick follows to see this one
                break
            X = self._listed_X[row : row + 1]
            if exact is not None:
                exact = exact.believing(X, mean[pick : pick + 1])
            else:
                local = len(out) >= n - n_local and bool((fresh & near).any())
                cols = near_rows if local else None
                process.believe(candidate.key, X, mean[pick : pick + 1], row, cols)
        return out

    def _exact_process(
        self,
        ok: list[EvaluationRecord],
        failed: list[EvaluationRecord],
        y: np.ndarray,
        believed: list[Candidate],
        picked: list[tuple[np.ndarray, int, int | None]],
    ) -> GaussianProcess:
        """The `GaussianProcess` of the evaluations and the candidates out, rebuilt from them
        and taken through the picks so far (`picked`: the rows ranked, the pick among them, its
        row if it was proposed): where the highest expected improvement is a tie within
        rounding (two configurations one unordered value apart and equally far from every
        evaluation), the pick is `GaussianProcess`'s, so that the search proposes what a
        process rebuilt for each pick would, whatever `ListedProcess`'s rounding."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        fitted = [*ok, *failed]
        X = self._process_features([r.genes for r in fitted], [r.key for r in fitted])
        if config.length_scales == "shared":
            process = GaussianProcess(X, y)
        else:
            process = GaussianProcess(X, y, self._scales, noise=self._noise)
        if believed:
            B = self._process_features([c.genes for c in believed])
            process = process.believing(B, process.predict(B)[0])
        for rows, pick, row in picked:
            if row is not None:
                mean = process.predict(self._listed_X[rows])[0]
                process = process.believing(self._listed_X[row : row + 1], mean[pick : pick + 1])
        return process

    def _near(self, best: Genes) -> np.ndarray:
        """Which listed configurations change at most `LOCAL_CHANGES` parameters of `best`."""
        if getattr(self, "_listed_codes", None) is None:
            # Each column's genes as codes, equal where the genes are.
            self._gene_codes: list[dict[Any, int]] = [{} for _ in self.space.leaves]
            codes = np.empty(self._listed_genes.shape, dtype=np.int64)
            for j, column in enumerate(self._listed_genes.T):
                index = self._gene_codes[j]
                codes[:, j] = [index.setdefault(g, len(index)) for g in column]
            self._listed_codes = codes
        own = [index.get(g, -1) for index, g in zip(self._gene_codes, best, strict=True)]
        return (self._listed_codes != np.array(own)).sum(1) <= LOCAL_CHANGES

    def _listed_process(
        self,
        ok: list[EvaluationRecord],
        failed: list[EvaluationRecord],
        values: np.ndarray,
        y: np.ndarray,
    ) -> ListedProcess:
        """The process of the evaluations over the listed rows: length scales and noise as
        `_process_hyperparameters` says, conditioned on every evaluation (`y`: the successes'
        `values`, then the failures')."""
        scales, noise, batch = self._process_hyperparameters(ok, failed, y)
        process = getattr(self, "_listed_gp", None)
        if process is None or not process.fits(scales, noise):
            process = self._listed_gp = ListedProcess(self._listed_X, scales, noise)
        records = self._records
        is_failed = np.array([not r.ok for r in records])
        in_order = np.zeros(len(records))
        in_order[~is_failed] = values

        def points(i: int, j: int) -> tuple[np.ndarray, list[int]]:
            chosen = records[i:j]
            X = self._process_features([r.genes for r in chosen], [r.key for r in chosen])
            return X, [self._listed_index.get(tuple(r.genes), -1) for r in chosen]

        keys = [r.key for r in records]
        process.update(keys, points, in_order, is_failed, y, batch)
        return process

    def _process_hyperparameters(
        self, ok: list[EvaluationRecord], failed: list[EvaluationRecord], y: np.ndarray
    ) -> tuple[float | np.ndarray, float, int]:
        """The process's length scales and noise, and the evaluations they were fitted to
        (`batch` of `ListedProcess.update`): per-parameter scales (`length_scales`) and the
        noise are refitted on the schedule of `SCALES_REFIT_GROWTH` up to `SCALES_REFIT_UNTIL`
        evaluations and reused in between and after;
        one shared scale is chosen from `LENGTH_SCALES` by the likelihood every time."""
        records = self._records
        told = (len(records), records[-1].candidate_id if records else None)
        if getattr(self, "_hyperparameters_told", None) == told:
            # Nothing told since the last fit (asks between two results): the same fit.
            return self._hyperparameters
        self._hyperparameters: tuple[float | np.ndarray, float, int] = self._fit_hyperparameters(
            ok, failed, y
        )
        self._hyperparameters_told = told
        return self._hyperparameters

    def _fit_hyperparameters(
        self, ok: list[EvaluationRecord], failed: list[EvaluationRecord], y: np.ndarray
    ) -> tuple[float | np.ndarray, float, int]:
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        n = len(y)
        scales, fitted_at = getattr(self, "_scales", None), getattr(self, "_scales_at", 0)
        reuse = n > SCALES_REFIT_EVERY_GENERATION and (
            n < SCALES_REFIT_GROWTH * fitted_at or n > SCALES_REFIT_UNTIL
        )
        if config.length_scales != "shared" and scales is not None and reuse:
            return scales, self._noise, fitted_at
        fitted = [*ok, *failed]
        X = self._process_features([r.genes for r in fitted], [r.key for r in fitted])
        if config.length_scales == "shared":
            process = GaussianProcess(X, y)
            return process.length_scale, process.noise, n
        scales, noise = fitted_hyperparameters(X, y)
        self._scales, self._scales_at = np.asarray(scales), n
        self._noise = noise
        return self._scales, noise, n

    def _split(self) -> tuple[list[EvaluationRecord], list[EvaluationRecord]]:
        """Good (best `gamma` share of successes, at most `max_good`, best first) and other
        records (the rest of the successes and every failure)."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        ok = self._ranked_successes()
        n_good = min(max(1, math.ceil(config.gamma * len(ok))), config.max_good) if ok else 0
        good = ok[:n_good]
        ids = {r.candidate_id for r in good}
        return good, [r for r in self._records if r.candidate_id not in ids]

    def _ranked_successes(self) -> list[EvaluationRecord]:
        """The successful evaluations, lowest value (`_value`) first, ties in the order told:
        a stable sort's order, kept up to date as evaluations arrive (each goes in after the
        equal ones before it)."""
        records = self._records
        ranked: _Ranked | None = getattr(self, "_ranked", None)
        if ranked is None or ranked[0] is not records or ranked[1] > len(records):
            ranked = (records, 0, [], [])
        _, seen, order, values = ranked
        for record in records[seen:]:
            if record.ok:
                value = self._value(record)
                at = bisect.bisect_right(values, value)
                values.insert(at, value)
                order.insert(at, record)
        self._ranked = (records, len(records), order, values)
        return order
