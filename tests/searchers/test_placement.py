"""Trial placement on GPUs and the throughput summary of a search."""

from __future__ import annotations

import math

import pytest

from searchers.placement import format_throughput
from searchers.placement import plan_placement
from searchers.placement import search_throughput


def test_one_trial_per_gpu_by_default():
    placement = plan_placement("triton", cluster_gpus=2, cluster_cpus=16)
    assert placement.resources == {"cpu": 1.0, "gpu": 1.0}
    assert placement.max_concurrent_trials == 2 and placement.gpus == 2
    assert placement.steady_state


def test_trials_share_a_gpu_in_fractions_that_fit():
    placement = plan_placement("cuda", cluster_gpus=1, cluster_cpus=16, trials_per_gpu=3)
    share = placement.resources["gpu"]
    assert 3 * share <= 1.0 and share == 0.3333
    assert placement.max_concurrent_trials == 3 and placement.steady_state


def test_a_single_trial_keeps_generations():
    assert not plan_placement("triton", cluster_gpus=1, cluster_cpus=16).steady_state


@pytest.mark.parametrize(("kind", "gpus"), [("ptx", 8), ("triton", 0), ("triton", 0.5)])
def test_no_gpu_resources_without_a_gpu_or_a_run(kind, gpus):
    placement = plan_placement(kind, cluster_gpus=gpus, cluster_cpus=4, trials_per_gpu=4)
    assert placement.resources == {"cpu": 1.0} and placement.gpus == 0
    assert not placement.steady_state


@pytest.mark.parametrize(
    ("cpus", "cpus_per_trial", "concurrent"), [(8, 1.0, 8), (8, 3.0, 2), (2, 1.5, 1), (0.5, 1.0, 1)]
)
def test_cpu_only_trials_run_one_per_cpu_slot(cpus, cpus_per_trial, concurrent):
    # Without max_concurrent_trials Tune would run a custom searcher's trials one at a time.
    placement = plan_placement(
        "ptx", cluster_gpus=0, cluster_cpus=cpus, cpus_per_trial=cpus_per_trial
    )
    assert placement.max_concurrent_trials == concurrent
    assert (
        placement.note == f"ptx: compile-only, {concurrent} trial(s) at a time on {cpus:g} CPU(s)"
    )


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_trials_per_gpu_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="trials_per_gpu"):
        plan_placement("triton", cluster_gpus=1, cluster_cpus=16, trials_per_gpu=bad)


def test_throughput_busy_fraction_and_phases():
    trials = [
        {
            "compile_s": 1.0,
            "gpu_s": 0.2,
            "gpu_wait_s": 0.1,
            "worker_spawn_s": 4.0,
            "wall_s": 5.4,
            "time_total_s": 5.5,
        },
        {
            "compile_s": 0.5,
            "gpu_s": 0.2,
            "gpu_wait_s": math.nan,
            "worker_spawn_s": 0.0,
            "wall_s": 0.8,
            "time_total_s": 0.9,
        },
        {"status": "compile_error", "compile_s": None, "wall_s": 0.3, "time_total_s": 0.3},
    ]
    summary = search_throughput(trials, wall_s=2.0, gpus=1, concurrency=4)
    assert summary["evaluations"] == 3 and summary["evals_per_s"] == 1.5
    assert summary["gpu_busy_fraction"] == pytest.approx(0.4 / 2.0)
    assert summary["mean_s"]["compile_s"] == pytest.approx(0.5)
    assert summary["mean_s"]["gpu_wait_s"] == pytest.approx(0.1 / 3)
    # 4 slots x 2 s = 8 slot-seconds, 6.7 of them in trials.
    assert summary["mean_s"]["outside_trials"] == pytest.approx((8 - 6.7) / 3)
    line = format_throughput(summary)
    assert "1.50 evals/s (4 at a time" in line and "GPU busy 20 %" in line
    # No Ray timestamps in these records: no rate after the first result.
    assert summary["evals_per_s_after_first"] is None


def test_throughput_after_the_first_result_leaves_out_the_start():
    trials = [{"timestamp": 1000 + t} for t in (0, 2, 3, 4, 4)]  # first result 1000, last 1004
    summary = search_throughput(trials, wall_s=20.0, gpus=1, concurrency=2)
    assert summary["evals_per_s"] == 0.25
    assert summary["evals_per_s_after_first"] == 1.0  # 4 more results in 4 s
    assert "0.25 evals/s, 1.00 after the first result" in format_throughput(summary)


def test_throughput_without_gpus_has_no_busy_fraction():
    summary = search_throughput([{"time_total_s": 1.0}], wall_s=1.0, gpus=0, concurrency=1)
    assert summary["gpu_busy_fraction"] is None
    assert "no GPU" in format_throughput(summary)
    with pytest.raises(ValueError, match="wall_s"):
        search_throughput([], wall_s=0, gpus=1, concurrency=1)


def test_cli_rejects_zero_trials_per_gpu(capsys):
    from ciq_tune.cli import main

    assert main(["tune", "examples/kernels/triton/softmax.yaml", "--trials-per-gpu", "0"]) == 2
    assert "`--trials-per-gpu` must be a positive integer, got 0" in capsys.readouterr().err


def test_the_first_results_time_is_split_into_its_phases() -> None:
    from searchers.placement import format_first_result

    started = 1000.0
    trials = [
        {"timestamp": 1020.0, "time_total_s": 3.0, "compile_s": 1.0},
        {  # the first result: handed out 9.0 s after the command, back 3.5 s later
            "timestamp": 1012.5,
            "time_total_s": 3.5,
            "worker_spawn_s": 1.25,
            "compile_s": 1.5,
            "gpu_wait_s": 0.5,
            "bench_spawn_s": 0.25,
            "gpu_s": 0.1,
        },
    ]
    assert format_first_result(trials, started) == (
        "first result at 12.5 s: handed out at 9.0 s; worker start 1.25 s, compile 1.50 s, "
        "waiting for the GPU 0.50 s (its worker's start 0.25 s), GPU 0.10 s"
    )
