"""One evaluation of a matrix on a CPU (Triton's interpreter): a configuration compiled once per
compile key, timed at every shape in one request, each shape with its own status."""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import Any

import pytest

from objectives import make_trainable
from objectives._stages import BenchmarkRequest
from objectives._stages import benchmark_here
from objectives.description import load_description
from objectives.matrix import bucket_score
from objectives.matrix import compile_key
from objectives.matrix import group_shapes
from objectives.matrix import make_matrix_trainable
from objectives.matrix import matrix_result
from objectives.matrix import shape_values
from tests.objectives.data.row_scale_description import row_scale_description

CONFIG = {"params": {"BLOCK": 16}, "controls": {}}


def _matrix(tmp_path: Path, entry: str, lengths: tuple[int, ...], **fields: Any) -> Any:
    shapes = [{"rows": r, "n_cols": n} for n in lengths for r in (1, 2)]
    path = row_scale_description(tmp_path, entry=entry, shapes=shapes, **fields)
    return load_description(path)


class CountingBenchmark:
    """`benchmark_here`, counting the requests it serves."""

    def __init__(self) -> None:
        self.requests: list[BenchmarkRequest] = []

    def __call__(self, request: BenchmarkRequest) -> dict[str, Any]:
        self.requests.append(request)
        return benchmark_here(request)


def timed_on(bench: CountingBenchmark, desc: Any) -> Any:
    """The matrix trainable of `desc` whose requests `bench` serves."""
    return make_matrix_trainable(
        desc, make_trainable=functools.partial(make_trainable, benchmark=bench)
    )


def test_compile_keys_follow_constexprs_and_integer_specialisation() -> None:
    key = functools.partial(compile_key, constexprs={"N"})
    assert key({"N": 64, "M": 32}) != key({"N": 128, "M": 32})  # a constexpr's value
    assert key({"N": 64, "M": 32}) == key({"N": 64, "M": 4096})  # both multiples of 16
    assert key({"N": 64, "M": 32}) != key({"N": 64, "M": 33})
    assert key({"N": 64, "M": 1}) != key({"N": 64, "M": 17})  # 1 is a constant to Triton
    assert key({"N": 64, "M": 2**31}) != key({"N": 64, "M": 2**30})  # 64-bit arguments
    assert key({"N": 64, "eps": 1e-5}) == key({"N": 64, "eps": 1e-6})  # floats: no key


def test_one_benchmark_request_times_every_shape_compiling_once_per_constexpr(
    tmp_path: Path,
) -> None:
    # `row_scale_fixed` takes the row length as a tl.constexpr: 3 lengths x 2 row counts
    # = 6 shapes, 3 kernels to compile.
    desc = _matrix(tmp_path, "row_scale_fixed", (16, 64, 256))
    bench = CountingBenchmark()
    trial = timed_on(bench, desc)
    result = trial(CONFIG)
    assert len(bench.requests) == 1
    assert result["status"] == "ok", result
    assert result["compiles"] == 3 and result["shapes_ok"] == 6
    values = shape_values(result, "time_ms", 6)
    assert all(v is not None and v > 0 for v in values)
    weights = [s.weight for s in desc.matrix()]
    expected = math.exp(sum(math.log(v) for v in values if v) / sum(weights))
    assert result["time_ms_geomean"] == pytest.approx(expected)


def test_integer_sizes_compile_once_per_specialisation_in_the_trials_own_worker(
    tmp_path: Path,
) -> None:
    # `row_scale_kernel` takes the row length as a plain integer: 16 and 64 share a kernel
    # (multiples of 16), 1 is specialised apart: 6 shapes, 2 kernels.
    desc = _matrix(tmp_path, "row_scale_kernel", (16, 64, 1))
    result = make_matrix_trainable(desc, make_trainable=make_trainable)(CONFIG)
    assert result["status"] == "ok", result
    assert result["compiles"] == 2 and result["shapes_ok"] == 6


def test_a_shape_that_fails_loses_none_of_the_others(tmp_path: Path) -> None:
    # Rows longer than 256 fail `row_scale_fixed`'s static assertion (at launch, under the
    # interpreter): the two shapes of length 512 fail, the four others are timed.
    desc = _matrix(tmp_path, "row_scale_fixed", (16, 512, 64))
    bench = CountingBenchmark()
    trial = timed_on(bench, desc)
    result = trial(CONFIG)
    assert len(bench.requests) == 1
    statuses = [result[f"status@{i}"] for i in range(6)]
    assert statuses == ["ok", "ok", "crash", "crash", "ok", "ok"], result
    assert "rows of at most 256 values" in result["error@2"]
    assert result["status"] == "crash" and "2 of 6 shapes failed; shape 2" in result["error"]
    assert math.isnan(result["time_ms_geomean"]) and result["shapes_ok"] == 4
    values = shape_values(result, "time_ms", 6)
    assert [v is not None for v in values] == [True, True, False, False, True, True]
    # The next candidate runs in a fresh worker (the crashed one retired) and succeeds.
    again = timed_on(bench, _matrix(tmp_path, "row_scale_fixed", (16, 64)))(CONFIG)
    assert again["status"] == "ok", again


def test_other_kinds_run_one_call_per_shape_with_the_same_result(tmp_path: Path) -> None:
    desc = _matrix(tmp_path, "row_scale_kernel", (16, 64))
    calls: list[dict[str, int]] = []

    def fake(shape_desc: Any) -> Any:
        def run(config: dict[str, Any]) -> dict[str, Any]:
            calls.append(shape_desc.sizes)
            if shape_desc.sizes == {"rows": 2, "n_cols": 64}:
                return {"status": "wrong_result", "error": "output 'y' differs"}
            return {"status": "ok", "time_ms": float(shape_desc.sizes["n_cols"])}

        return run

    desc = desc.model_copy(update={"kind": "cuda"})  # no one-request matrix task
    result = make_matrix_trainable(desc, make_trainable=fake)(CONFIG)
    assert len(calls) == 4
    assert [result[f"status@{i}"] for i in range(4)] == ["ok", "ok", "ok", "wrong_result"]
    assert result["status"] == "wrong_result" and result["time_ms@2"] == 64.0


def test_matrix_result_needs_every_shape_for_the_geomean(tmp_path: Path) -> None:
    desc = _matrix(tmp_path, "row_scale_kernel", (16,))
    both = matrix_result(desc, [{"status": "ok", "time_ms": 2.0}, {"status": "ok", "time_ms": 8.0}])
    assert both["status"] == "ok" and both["time_ms_geomean"] == pytest.approx(4.0)
    zero = matrix_result(desc, [{"status": "ok", "time_ms": 0.0}, {"status": "ok", "time_ms": 8.0}])
    assert zero["status"] == "ok" and zero["time_ms_geomean"] == 0.0
    nan = matrix_result(
        desc, [{"status": "ok", "time_ms": 2.0}, {"status": "ok", "time_ms": math.nan}]
    )
    assert nan["status"] == "crash" and nan["status@1"] == "crash" and nan["shapes_ok"] == 1


def test_bucket_scores_are_relative_to_the_baseline_with_the_guard(tmp_path: Path) -> None:
    one = _matrix(
        tmp_path, "row_scale_kernel", (16, 64), selection={"mode": "one", "worst_shape_limit": 1.5}
    )
    (group,) = group_shapes(one)
    base = [1.0, 2.0, 3.0, 4.0]
    assert bucket_score(one, group, [0.5, 1.0, 1.5, 2.0], base) == pytest.approx(0.5)
    assert bucket_score(one, group, [0.5, 1.0, 1.5, 7.0], base) is None  # 1.75x: past the guard
    assert bucket_score(one, group, [0.5, 1.0, None, 2.0], base) is None  # a shape failed
    # A baseline that failed at a shape: the plain geometric mean, no guard.
    assert bucket_score(one, group, [1.0, 1.0, 1.0, 16.0], [1.0, None, 1.0, 1.0]) == 2.0
    # A minimised metric of 0 (no spilled bytes, say) is a ratio of 0, the best there is.
    assert bucket_score(one, group, [0.0, 1.0, 1.5, 2.0], base) == 0.0
    per_shape = group_shapes(_matrix(tmp_path, "row_scale_kernel", (16, 64)))
    assert len(per_shape) == 4
    assert bucket_score(one, per_shape[3], [9.0, 9.0, 9.0, 2.0], base) == pytest.approx(0.5)


def test_a_cut_off_ends_each_shapes_round_after_one_launch_and_says_so(tmp_path: Path) -> None:
    from objectives.protocol import CUT_FROM_MS

    desc = _matrix(tmp_path, "row_scale_fixed", (16, 64, 256))
    bench = CountingBenchmark()
    trial = timed_on(bench, desc)
    full = trial(CONFIG)
    assert full["shapes_cut"] == 0 and not any(f"cut@{i}" in full for i in range(6))
    # Every interpreted first launch is past a cut-off of CUT_FROM_MS (and none ends a round
    # without its own cut-off): shapes 0-2 cut, 3-5 timed in full.
    cutoffs = [CUT_FROM_MS] * 3 + [None] * 3
    request = dataclasses.replace(
        bench.requests[0], payload={**bench.requests[0].payload, "cutoff_ms": cutoffs}
    )
    result = benchmark_here(request)
    assert result["status"] == "ok" and result["shapes_cut"] == 3, result
    assert [result.get(f"cut@{i}", False) for i in range(6)] == [True] * 3 + [False] * 3
    assert all(v is not None and v >= CUT_FROM_MS for v in shape_values(result, "time_ms", 3))


class _Recorded:
    """A benchmark that answers each request with the next of `results` and keeps the
    requests' cut-offs."""

    def __init__(self, results: list[dict[str, Any]]) -> None:
        self.results = results
        self.cutoffs: list[Any] = []

    def __call__(self, request: BenchmarkRequest) -> dict[str, Any]:
        self.cutoffs.append(request.payload.get("cutoff_ms"))
        return self.results.pop(0)


def test_cut_offs_follow_the_best_full_rounds_only(tmp_path: Path) -> None:
    from objectives.cutoffs import Cutoffs

    desc = _matrix(tmp_path, "row_scale_fixed", (16,))  # 2 shapes
    inner = _Recorded(
        [
            {"status@0": "ok", "time_ms@0": 4.0, "status@1": "compile_error"},
            # a cut value (1.0) and a failed shape teach nothing
            {"status@0": "ok", "time_ms@0": 1.0, "cut@0": True, "status@1": "ok", "time_ms@1": 3.0},
            {"status@0": "ok", "time_ms@0": 2.0, "status@1": "wrong_result", "time_ms@1": 0.5},
            {},
        ]
    )
    bench = Cutoffs(inner, desc, factor=2.0)
    request = BenchmarkRequest(target="t", payload={"x": 1}, compile_timeout_s=1, run_timeout_s=1)
    for _ in range(4):
        bench(request)
    assert inner.cutoffs == [None, [8.0, None], [8.0, 6.0], [4.0, 6.0]]
    assert request.payload == {"x": 1}  # the caller's request is left as it was
    # a description that is not a time to minimise is never cut
    slow = Cutoffs(
        _Recorded([{"status@0": "ok", "time_ms@0": 1.0}] * 2),
        desc.model_copy(update={"mode": "max"}),
    )
    slow(request)
    slow(request)
    assert slow.cutoffs_ms() == [None, None] and not slow.cutting
