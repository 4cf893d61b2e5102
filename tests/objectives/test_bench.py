"""Tests of the benchmark harness: statistics, inputs, poisoning, checks and timers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from objectives._arrays import poison_
from objectives._arrays import random_tensor
from objectives._bench import compare
from objectives.protocol import summarize
from objectives.protocol import time_cuda
from objectives.protocol import time_host


def test_summarize_median_iqr_cv():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0], timer="host")
    assert s.median_ms == 3.0
    assert s.iqr_ms == pytest.approx(2.0)
    assert s.min_ms == 1.0 and s.max_ms == 100.0 and s.n == 5
    assert s.cv == pytest.approx(np.std([1, 2, 3, 4, 100], ddof=1) / 22.0)
    assert s.as_metrics()["timer"] == "host"


def test_summarize_single_value_has_no_spread():
    s = summarize([0.5], timer="cuda_events")
    assert s.cv == 0.0 and s.iqr_ms == 0.0


@pytest.mark.parametrize("bad", [[], [1.0, math.nan], [math.inf]])
def test_summarize_rejects_empty_and_nonfinite(bad):
    with pytest.raises(ValueError, match="times_ms"):
        summarize(bad, timer="host")


@pytest.mark.parametrize("init", ["randn", "rand", "randint"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int32])
def test_random_tensor_is_never_all_zero_and_seeded(init, dtype):
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    a = random_tensor((64, 32), dtype, init, generator=g1, device="cpu")
    b = random_tensor((64, 32), dtype, init, generator=g2, device="cpu")
    assert a.dtype == dtype and a.shape == (64, 32)
    assert torch.equal(a, b)
    assert (a != 0).float().mean() > 0.8
    c = random_tensor((64, 32), dtype, init, generator=g1, device="cpu")
    assert not torch.equal(a, c)


def test_random_tensor_rejects_zeros():
    with pytest.raises(ValueError, match="init='zeros'"):
        random_tensor((4,), torch.float32, "zeros", generator=torch.Generator(), device="cpu")


def test_poison_float_int_bool():
    f = poison_(torch.zeros(5, dtype=torch.float16))
    i = poison_(torch.zeros(5, dtype=torch.int32))
    b = poison_(torch.zeros(5, dtype=torch.bool))
    assert torch.isnan(f).all()
    assert (i == torch.iinfo(torch.int32).max).all()
    assert b.all()


def test_compare_within_tolerance():
    ref = torch.randn(100, dtype=torch.float64)
    res = compare((ref + 1e-4).to(torch.float16), ref, rtol=1e-2, atol=1e-2)
    assert res.ok and res.message == ""
    assert 0 < res.max_abs_err < 1e-2 and res.rel_err < 1e-2


def test_compare_unwritten_element_fails():
    ref = torch.randn(100)
    out = ref.clone()
    out[17] = math.nan
    res = compare(out, ref, rtol=1.0, atol=1.0)
    assert not res.ok
    assert "1 of 100" in res.message and "1 NaN" in res.message and "index 17" in res.message


def test_compare_wrong_value_and_shape():
    ref = torch.ones(4, 4)
    out = ref.clone()
    out[1, 2] = 2.0
    res = compare(out, ref, rtol=0.0, atol=0.5)
    assert not res.ok and res.max_abs_err == 1.0 and "index 6" in res.message
    assert not compare(ref.flatten(), ref, rtol=1, atol=1).ok


def test_time_host_rotates_inputs():
    seen = []
    stats = time_host(seen.append, n_rotate=3, reps=7)
    assert seen == [0, 1, 2, 0, 1, 2, 0, 1]  # one warm-up call, then 7 timed
    assert stats.n == 7 and stats.timer == "host" and stats.median_ms >= 0


@pytest.mark.gpu
def test_time_cuda_matches_kernel_scale():
    x = [torch.randn(2**24, device="cuda") for _ in range(2)]
    y = torch.empty_like(x[0])
    stats = time_cuda(lambda i: torch.mul(x[i], 2.0, out=y), n_rotate=2, warmup_ms=10, rep_ms=50)
    # 2**24 floats read + written = 128 MiB: between 10 µs (13 TB/s) and 10 ms on any datacenter GPU
    assert stats.timer == "cuda_events" and stats.n > 5
    assert 0.01 < stats.median_ms < 10.0
    assert stats.min_ms <= stats.median_ms <= stats.max_ms


@pytest.mark.gpu
def test_time_cuda_agrees_with_triton_do_bench():
    # time_cuda is do_bench's procedure written over the array library (objectives/protocol.py).
    from triton.testing import do_bench

    x = [torch.randn(2**24, device="cuda") for _ in range(2)]
    y = torch.empty_like(x[0])
    theirs = do_bench(lambda: torch.mul(x[0], 2.0, out=y), warmup=25, rep=100, return_mode="median")
    ours = time_cuda(lambda i: torch.mul(x[i], 2.0, out=y), n_rotate=2, warmup_ms=25, rep_ms=100)
    assert 0.9 < ours.median_ms / theirs < 1.1, (ours.median_ms, theirs)
