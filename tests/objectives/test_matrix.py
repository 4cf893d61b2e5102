"""Tests of benchmark matrices: shapes, selection, buckets, one evaluation at every shape."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from ciq_tune.errors import DescriptionError
from objectives.description import load_description
from objectives.matrix import combine
from objectives.matrix import group_shapes
from objectives.matrix import selection_rule

DATA = Path(__file__).parent / "data"


def _desc(tmp_path: Path, **overrides: Any):
    data = {
        "kind": "triton",
        "source": str(DATA / "scale.py"),
        "entry": "scale_kernel",
        "sizes": {"n": 1024},
        "inputs": [{"name": "x", "shape": ["rows", "n"]}, {"name": "y", "shape": ["rows", "n"]}],
        "outputs": ["y"],
        "grid": "(rows * ceil(n / BLOCK),)",
        "reference": "2.0 * x",
        "params": {"BLOCK": {"ordinal": [128, 256]}},
        "shapes": [{"rows": 1}, {"rows": 16, "weight": 3}, {"rows": 100}, {"rows": 128}],
        "sizes_not_passed": ["rows"],
        **overrides,
    }
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_description(path)


def test_shapes_merge_over_sizes_and_carry_weights(tmp_path: Path) -> None:
    desc = _desc(tmp_path)
    assert [s.sizes for s in desc.matrix()] == [{"n": 1024, "rows": r} for r in (1, 16, 100, 128)]
    assert [s.weight for s in desc.matrix()] == [1, 3, 1, 1]
    assert desc.selection is not None and desc.selection.mode == "per_shape"  # triton default
    one = desc.at_shape(desc.matrix()[1])
    assert one.sizes == {"n": 1024, "rows": 16} and one.shapes == []
    # `rows` shapes the inputs and the grid but is not a kernel argument.
    assert one.launch_sizes() == {"n": 1024}
    assert one.launch({"BLOCK": 256}) == {"grid": (64,)}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"shapes": [{"rows": 1}, {"rows": 1}]}, "repeats"),
        ({"shapes": [{"rows": 1}, {"n": 8}]}, r"shapes\[1\]` lacks \['rows'\]"),
        ({"shapes": [{"rows": 1.5}]}, "integers"),
        ({"shapes": [{"rows": 1, "weight": 0}]}, "weight"),
        ({"sizes_not_passed": ["cols"]}, "sizes_not_passed"),
        ({"selection": {"mode": "per_key"}}, "needs `key`"),
        ({"selection": {"mode": "per_key", "key": ["m"]}}, "selection.key"),
        ({"selection": {"mode": "one", "worst_shape_limit": 0.9}}, "worst_shape_limit"),
        (
            {"shapes": [], "sizes": {"n": 8, "rows": 1}, "selection": {"mode": "one"}},
            "add `shapes`",
        ),
    ],
)
def test_bad_matrices_are_rejected(tmp_path: Path, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(DescriptionError, match=message):
        _desc(tmp_path, **overrides)


def test_compilation_unit_kinds_default_to_one_configuration(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float *x, int n) {}\n")
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "kind": "cuda",
                "source": str(src),
                "entry": "k",
                "shapes": [{"n": 1}, {"n": 2}],
                "grid": "(n,)",
                "block": "(32,)",
            }
        )
    )
    desc = load_description(path)
    assert desc.selection is not None and desc.selection.mode == "one"
    rule = selection_rule(desc)
    assert rule.key == [] and rule.worst_shape_limit == pytest.approx(1.10)
    assert [g.key for g in group_shapes(desc)] == [{}]


def test_buckets_per_key_pow2_and_per_shape(tmp_path: Path) -> None:
    per_key = _desc(tmp_path, selection={"mode": "per_key", "key": ["rows"], "bucket": "pow2"})
    groups = group_shapes(per_key)
    # 100 and 128 share the bucket rows=128, as a next-power-of-two autotune key would.
    assert [(g.key, [s.sizes["rows"] for s in g.shapes]) for g in groups] == [
        ({"rows": 1}, [1]),
        ({"rows": 16}, [16]),
        ({"rows": 128}, [100, 128]),
    ]
    per_shape = group_shapes(_desc(tmp_path))
    assert len(per_shape) == 4 and per_shape[2].key == {"n": 1024, "rows": 100}


def test_combine_weighted_geomean_and_worst() -> None:
    geomean, worst = combine([1.0, 4.0], [2.0, 2.0], [1.0, 1.0], mode="min")
    assert geomean == pytest.approx(1.0) and worst == pytest.approx(2.0)
    geomean, _ = combine([1.0, 4.0], [2.0, 2.0], [3.0, 1.0], mode="min")
    assert geomean == pytest.approx(0.5**0.75 * 2**0.25)
    assert combine([4.0], [2.0], [1.0], mode="max")[0] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="positive"):
        combine([math.nan], [1.0], [1.0], mode="min")


@pytest.mark.parametrize(
    ("name", "n_shapes", "n_buckets"),
    [
        ("matmul_llm", 12, 12),
        ("matmul_llm_bf16", 12, 12),
        ("attention_seqlens", 6, 6),
        ("layer_norm_matrix", 6, 6),
    ],
)
def test_workload_examples_load(name: str, n_shapes: int, n_buckets: int) -> None:
    desc = load_description(DATA.parents[2] / f"examples/kernels/triton/{name}.yaml")
    assert len(desc.matrix()) == n_shapes
    groups = group_shapes(desc)
    assert len(groups) == n_buckets
    assert sorted(i for g in groups for i in g.indices) == list(range(n_shapes))


def test_latency_percentiles_come_with_every_round() -> None:
    from objectives.protocol import summarize

    stats = summarize([float(i) for i in range(1, 101)], timer="host")
    assert stats.p50_ms == pytest.approx(50.5)
    assert stats.p95_ms == pytest.approx(95.05) and stats.p99_ms == pytest.approx(99.01)
    assert stats.median_ms == stats.p50_ms
