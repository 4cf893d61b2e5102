"""Tests of benchmark matrices in descriptions: shapes, selection, buckets, schedule, transfer."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from ciq_tune.errors import DescriptionError
from objectives.description import load_description
from objectives.matrix import GROUP_METRIC
from objectives.matrix import GUARD_STATUS
from objectives.matrix import combine
from objectives.matrix import group_shapes
from objectives.matrix import make_group_trainable
from objectives.matrix import schedule
from objectives.matrix import selection_rule
from objectives.matrix import transfer_points

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


def test_schedule_starts_at_the_medoid_and_grows_by_nearest(tmp_path: Path) -> None:
    shapes = [{"rows": r} for r in (1, 4, 16, 64, 256, 1024)]
    order = schedule(group_shapes(_desc(tmp_path, shapes=shapes)))
    rows = [g.shapes[0].sizes["rows"] for g in order]
    assert rows[0] in (16, 64)  # the log-space middle
    for i in range(1, len(rows)):
        gaps = [abs(math.log2(rows[i]) - math.log2(r)) for r in rows[:i]]
        assert min(gaps) == 2.0  # always next to a tuned neighbour (a factor of 4 away)


def test_transfer_points_are_nearest_first_and_distinct(tmp_path: Path) -> None:
    groups = group_shapes(_desc(tmp_path))  # rows 1, 16, 100, 128
    a, b, c = ({"params": {"BLOCK": v}} for v in (128, 256, 256))
    tuned = [(groups[0], a), (groups[1], b), (groups[3], c)]
    assert transfer_points(groups[2], tuned, limit=3) == [c, a]  # rows 128 nearest to 100
    assert transfer_points(groups[2], tuned, limit=1) == [c]


def test_combine_weighted_geomean_and_worst() -> None:
    geomean, worst = combine([1.0, 4.0], [2.0, 2.0], [1.0, 1.0], mode="min")
    assert geomean == pytest.approx(1.0) and worst == pytest.approx(2.0)
    geomean, _ = combine([1.0, 4.0], [2.0, 2.0], [3.0, 1.0], mode="min")
    assert geomean == pytest.approx(0.5**0.75 * 2**0.25)
    assert combine([4.0], [2.0], [1.0], mode="max")[0] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="positive"):
        combine([math.nan], [1.0], [1.0], mode="min")


def test_group_trainable_scores_relative_geomean_with_the_worst_shape_guard(
    tmp_path: Path,
) -> None:
    desc = _desc(tmp_path, selection={"mode": "one", "worst_shape_limit": 1.5})
    (group,) = group_shapes(desc)
    times = {1: 1.0, 16: 2.0, 100: 3.0, 128: 4.0}

    def fake(shape_desc: Any) -> Any:
        def run(config: dict[str, Any]) -> dict[str, Any]:
            scale = config["params"]["BLOCK"] / 128
            return {"status": "ok", "time_ms": times[shape_desc.sizes["rows"]] * scale}

        return run

    baselines = [1.0, 2.0, 3.0, 4.0]
    trial = make_group_trainable(desc, group, baselines, make_trainable=fake)
    same = trial({"params": {"BLOCK": 128}})
    assert same["status"] == "ok" and same[GROUP_METRIC] == pytest.approx(1.0)
    assert same["time_ms@3"] == 4.0
    slow = trial({"params": {"BLOCK": 256}})  # 2x on every shape: past the 1.5 limit
    assert slow["status"] == GUARD_STATUS and math.isnan(slow[GROUP_METRIC])
    with pytest.raises(ValueError, match="baseline"):
        make_group_trainable(desc, group, None, make_trainable=fake)


@pytest.mark.parametrize(
    ("name", "n_shapes", "n_buckets"),
    [("matmul_llm", 12, 12), ("matmul_llm_bf16", 12, 12), ("attention_seqlens", 6, 6)],
)
def test_workload_examples_load(name: str, n_shapes: int, n_buckets: int) -> None:
    desc = load_description(DATA.parents[2] / f"examples/kernels/triton/{name}.yaml")
    assert len(desc.matrix()) == n_shapes
    order = schedule(group_shapes(desc))
    assert len(order) == n_buckets
    # Every bucket after the first has a tuned neighbour at most one step of the matrix away
    # (M goes 1, 16, 128, …: a factor of 16 at most).
    for i in range(1, len(order)):
        assert min(order[i].distance(t) for t in order[:i]) <= 4.0


def test_latency_percentiles_come_with_every_round() -> None:
    from objectives.protocol import summarize

    stats = summarize([float(i) for i in range(1, 101)], timer="host")
    assert stats.p50_ms == pytest.approx(50.5)
    assert stats.p95_ms == pytest.approx(95.05) and stats.p99_ms == pytest.approx(99.01)
    assert stats.median_ms == stats.p50_ms


def test_energy_is_measured_when_it_is_the_metric(tmp_path: Path) -> None:
    from objectives import make_trainable

    desc = _desc(tmp_path, metric="energy_mj")
    # partial(objectives._trainable._trainable, worker, data, energy)
    assert make_trainable(desc).args[2] is True
    plain = make_trainable(_desc(tmp_path))
    assert plain.args[2] is False
    assert make_trainable(_desc(tmp_path), energy=True).args[2] is True
