"""Re-measurement and verification under Triton's interpreter (host clock, tiny sizes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOFTMAX = REPO / "examples/kernels/triton/softmax.yaml"


def _run(body: str) -> dict:
    # In a subprocess: the interpreter must be on before the kernel module is imported.
    script = textwrap.dedent(
        f"""
        import json, sys
        from objectives import load_description
        desc = load_description({str(SOFTMAX)!r})
        desc = desc.model_copy(update={{"sizes": {{"M": 37, "N": 100, "BLOCK_N": 128,
                                                  "NUM_SMS": 3}}}})
        default = {{"params": {{"ROWS": 1, "PROGRAMS_PER_SM": 4, "LOOP_STAGES": 4,
                                "num_warps": 8}}}}
        tuned = {{"params": {{"ROWS": 2, "PROGRAMS_PER_SM": 1, "LOOP_STAGES": 2,
                              "num_warps": 8}}}}
        """
    ) + textwrap.dedent(body)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_remeasure_checks_then_compares_every_variant_with_the_reference():
    record = _run(
        """
        from objectives.remeasure import remeasure
        # A configuration naming an unknown parameter: refused, not timed.
        broken = {"params": {**tuned["params"], "bogus": 1}}
        record = remeasure(desc, {"default": default, "tuned": tuned, "broken": broken,
                                  "alternative": None}, rounds=4, warmup_rounds=1, device="cpu")
        json.dump(record, sys.stdout, default=str)
        """
    )
    assert set(record["variants"]) == {"default", "tuned", "alternative"}
    assert "bogus" in record["skipped"]["broken"]
    assert set(record["comparisons"]) == {"tuned_vs_default", "tuned_vs_alternative"}
    for stats in record["variants"].values():
        assert len(stats["samples_ms"]) == 4 and stats["median_ms"] > 0
        assert stats["median_ci_low_ms"] <= stats["median_ms"] <= stats["median_ci_high_ms"]
    comparison = record["comparisons"]["tuned_vs_default"]
    assert comparison["test"] == "wilcoxon" and comparison["measurement"] == "interleaved"
    # Two comparisons: Bonferroni halves alpha.
    assert comparison["config"]["alpha"] == 0.025
    assert record["timer"] == "host" and record["protocol"]["rep_ms"] == 40.0


def test_verify_config_measures_tuned_baseline_and_alternative_by_the_protocol():
    record = _run(
        """
        from objectives.verify import format_verification, verify_config
        record = verify_config(desc, tuned, rounds=3, warmup_rounds=0, device="cpu")
        print(format_verification(record))
        json.dump(record, sys.stdout, default=str)
        """
    )
    assert set(record["protocol"]["variants"]) == {"tuned", "baseline", "alternative"}
    assert record["cuda_graph"] is None and record["agreement"] == {}
    assert record["alternative"] == "torch.softmax"


def test_verify_command_reads_the_controls_file_and_its_run_json(tmp_path):
    record = _run(
        f"""
        import contextlib, io
        from pathlib import Path
        import yaml
        from ciq_tune.cli import main
        from ciq_tune.controls import controls_file as cf
        out = Path({str(tmp_path)!r})
        small = out / "softmax.yaml"
        data = yaml.safe_load(Path({str(SOFTMAX)!r}).read_text())
        data.update(sizes=desc.sizes, source={str(SOFTMAX.parent / "softmax.py")!r})
        small.write_text(yaml.safe_dump(data))
        (out / "run.json").write_text(json.dumps({{"description": str(small)}}))
        record = cf.build(
            kernel=cf.KernelInfo(name=desc.name, kind="triton", source=str(desc.source),
                                 source_sha256=desc.source_sha256(), entry=desc.entry,
                                 arch=desc.arch),
            catalogs={{}}, controls={{}}, params=tuned["params"],
            benchmark=cf.Benchmark(metric="time_ms", mode="min"),
            scores=cf.Scores(baseline=2.0, best=1.0, remeasured=cf.Remeasured(
                baseline_median=2.1, baseline_ci=(2.0, 2.2), best_median=1.1,
                best_ci=(1.0, 1.2), speedup=1.9, speedup_ci=(1.8, 2.0), rounds=50,
                confidence=0.95)),
        )
        path = cf.write(out / "softmax.controls.yaml", record)
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            code = main(["verify", str(path), "--rounds", "3", "--json", str(out / "v.json")])
        saved = json.loads((out / "v.json").read_text())
        json.dump({{"code": code, "text": text.getvalue(), "saved": saved}}, sys.stdout)
        """
    )
    assert record["code"] == 0
    assert "recorded at tuning: best 1.1000 ms" in record["text"]
    assert set(record["saved"]["protocol"]["variants"]) == {"tuned", "baseline", "alternative"}
    assert record["saved"]["recorded"]["best_median"] == 1.1


def test_config_rounds_build_and_check_once_then_time_one_round_per_call():
    record = _run(
        """
        from unittest import mock
        import objectives.remeasure as rm
        from objectives._bench import timing_sets
        from ciq_tune.errors import MeasurementError
        sets = timing_sets(desc, device="cpu")
        with mock.patch.object(rm, "check", wraps=rm.check) as checked:
            rounds = rm.ConfigRounds(desc, tuned, sets, device="cpu")
            values = [rounds() for _ in range(3)]
        try:
            rm.ConfigRounds(desc, {"params": {**tuned["params"], "bogus": 1}}, sets, device="cpu")
            refused = ""
        except MeasurementError as exc:
            refused = str(exc)
        json.dump({"values": values, "checks": checked.call_count, "refused": refused},
                  sys.stdout)
        """
    )
    assert record["checks"] == 1
    assert len(record["values"]) == 3 and all(v > 0 for v in record["values"])
    assert "bogus" in record["refused"] and "does not build or check" in record["refused"]


def test_a_matrix_bucket_measure_is_the_weighted_geomean_relative_to_the_baseline():
    record = _run(
        """
        import math
        from objectives.description import Shape
        from objectives.matrix import ShapeGroup
        import searchers.matrix_validation as mv
        shapes = [Shape(sizes={"M": 37, "N": 100, "BLOCK_N": 128, "NUM_SMS": 3}, weight=3),
                  Shape(sizes={"M": 5, "N": 60, "BLOCK_N": 64, "NUM_SMS": 3}, weight=1)]
        group = ShapeGroup(key={}, shapes=tuple(shapes), indices=(0, 1))
        # Rounds of fixed length (a GPU's, faked): 1 ms at the first shape, 8 ms at the second.
        times = {37: 1.0, 5: 8.0}
        def timer_for(at, config):
            return lambda: times[at.sizes["M"]]
        measure = mv.BucketMeasure(desc, group, [2.0, 4.0], timer_for)
        value = measure(tuned)
        # (1/2)^(3/4) * (8/4)^(1/4)
        json.dump({"value": value, "expected": 0.5 ** 0.75 * 2 ** 0.25,
                   "timers": len(measure._timers)}, sys.stdout)
        """
    )
    assert abs(record["value"] - record["expected"]) < 1e-12
    assert record["timers"] == 2


def test_a_warm_description_is_timed_on_one_input_set_and_says_so():
    """`l2: warm`: one timing set (no rotation), for the search's rounds and re-measurements
    alike; cold rotates several."""
    record = _run(
        """
        from objectives._bench import timing_sets
        from objectives._bench.harness import check_and_time
        from objectives.remeasure import make_launch
        warm = desc.model_copy(update={"l2": "warm"})
        launch = make_launch(warm, tuned, device="cpu")
        timed = check_and_time(warm, launch, seed=0, device="cpu")
        json.dump({"cold": len(timing_sets(desc, device="cpu")),
                   "warm": len(timing_sets(warm, device="cpu")),
                   "n_rotate": timed["n_rotate"]}, sys.stdout)
        """
    )
    assert record["cold"] > 1
    assert record["warm"] == record["n_rotate"] == 1
