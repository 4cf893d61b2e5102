"""Helion matmul on a GPU: GPU tests, a ciq-tune search, Helion's own autotuner, re-measurement.

    python3 scripts/gpu/helion_matmul.py --out $OUT/helion_matmul [--evals 40] [--budget-s 60]

On the GPU machine, with .whl carried (../shared/tools/gpu-wheels.sh, then
scripts/gpu/helion-wheels.sh), about 4 minutes on an H100 in all:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=$PWD:/tmp/site RAY_AUTH_MODE=disabled
    python3 scripts/gpu/helion_matmul.py --out $OUT/helion_matmul

Steps (``--steps``, each guarded: a failure is recorded and the next step runs; ``<out>.json``
and ``<out>.md`` are rewritten after every step, so a timeout keeps what was done):

  tests      pytest -m gpu tests/objectives/test_helion.py (log: ``<out>_tests.log``)
  ciq        Ray Tune + CompileIQSearcher over the space derived from Helion's config spec,
             warm-started at Helion's default Config (``searchers.kernel_search.run_search``)
  helion     Helion's own autotuner (``HELION_AUTOTUNE_EFFORT=quick``) on the same kernel and
             shape, in a fresh process as a user runs it (log: ``<out>_autotune.log``)
  remeasure  Helion's default, ciq-tune's best, Helion's best and torch.matmul (the
             description's alternative) interleaved (``objectives.remeasure``), with the paired
             statistics of each speedup (``ciq_tune.validation.compare_samples``)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ciq_tune.validation import ValidationConfig
from ciq_tune.validation import compare_samples
from objectives import load_description
from objectives import make_search_space
from objectives import starting_points
from objectives.remeasure import ALTERNATIVE
from objectives.remeasure import remeasure

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `bench` is not installed

from bench.description_search import search_description

ROOT = Path(__file__).resolve().parents[2]
DESCRIPTION = str(ROOT / "examples/kernels/helion/matmul.yaml")
STEPS = ("tests", "ciq", "helion", "remeasure")
# Speedups reported: (candidate, baseline); above 1 the candidate is faster.
COMPARISONS = (
    ("ciq_best", "default"),
    ("ciq_best", "helion_autotune"),
    ("ciq_best", "alternative"),
    ("helion_autotune", "default"),
)
_AUTOTUNE_DONE = re.compile(r"Autotuning complete in ([\d.]+)s after searching (\d+) configs")


def run_gpu_tests(out: Path, timeout_s: float) -> dict[str, Any]:
    """The GPU-marked Helion tests in a subprocess; the log goes to ``<out>_tests.log``."""
    log = out.parent / f"{out.name}_tests.log"
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-rA", "-p", "no:cacheprovider"]
    with log.open("w") as sink:
        proc = subprocess.run(
            [*cmd, "tests/objectives/test_helion.py"],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
            check=False,
        )
    lines = log.read_text().strip().splitlines()
    return {"returncode": proc.returncode, "summary": lines[-1] if lines else ""}


def search_with_ciq(desc_path: str, evals: int, budget_s: float, seed: int) -> dict[str, Any]:
    """Derive the space (timed), then tune through Ray Tune from Helion's default Config."""
    import ray
    from ray import tune

    desc = load_description(desc_path)
    t0 = time.perf_counter()
    space = make_search_space(desc)  # cached: `search` below reuses it
    derive_s = time.perf_counter() - t0
    default = starting_points(desc, space)[0]
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        run, _ = search_description(
            desc,
            [default],
            budget=evals,
            seed=seed,
            run_config=tune.RunConfig(verbose=0, storage_path="/tmp/ciq-ray"),
            time_budget_s=budget_s,
        )
    finally:
        ray.shutdown()
    statuses: dict[str, int] = {}
    for trial in run.trials:
        statuses[trial["status"]] = statuses.get(trial["status"], 0) + 1
    return {
        "trials": run.trials,
        "best": run.best,
        "search_wall_s": run.wall_s,
        "n_trials": len(run.trials),
        "default": default,
        "derive_s": derive_s,
        "statuses": statuses,
    }


def autotune_with_helion(desc_path: str, out: Path, timeout_s: float, seed: int) -> dict[str, Any]:
    """Helion's quick autotune in a fresh process (`_helion_autotune_main`); its own wall time,
    the process's wall time and the number of configs Helion reports having searched."""
    log = out.parent / f"{out.name}_autotune.log"
    result_file = out.parent / f"{out.name}_autotune.tmp.json"
    env = {
        **os.environ,
        "HELION_AUTOTUNE_EFFORT": "quick",
        "HELION_AUTOTUNE_RANDOM_SEED": str(seed),
        "HELION_AUTOTUNE_PROGRESS_BAR": "0",
    }
    cmd = [sys.executable, __file__, "--description", desc_path, "--autotune-to", str(result_file)]
    t0 = time.perf_counter()
    with log.open("w") as sink:
        proc = subprocess.run(
            cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, check=False
        )
    process_s = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"Helion's autotune exited with {proc.returncode}; see {log}")
    result = json.loads(result_file.read_text())
    result_file.unlink()
    done = _AUTOTUNE_DONE.search(log.read_text())
    return {
        **result,
        "process_s": process_s,
        "configs_searched": int(done.group(2)) if done else None,
        "effort": "quick",
    }


def _helion_autotune_main(desc_path: str, result_file: str) -> None:
    """In the fresh process: import the kernel's module as a user would, autotune, save."""
    from objectives._bench import make_inputs

    desc = load_description(desc_path)
    sys.path.insert(0, str(desc.source.parent))
    kernel = getattr(importlib.import_module(desc.source.stem), str(desc.entry))
    args = tuple(make_inputs(desc, seed=0, device="cuda").values())
    t0 = time.perf_counter()
    config = kernel.autotune(args, force=True)
    autotune_s = time.perf_counter() - t0
    result = {"helion_config": dict(config.config), "autotune_s": autotune_s}
    Path(result_file).write_text(json.dumps(result))


def remeasure_variants(desc_path: str, report: dict[str, Any], rounds: int) -> dict[str, Any]:
    """Interleaved re-measurement of what the earlier steps produced, with statistics."""
    variants: dict[str, dict[str, Any] | None] = {}
    ciq = report.get("ciq", {})
    if "default" in ciq:
        variants["default"] = ciq["default"]
    if ciq.get("best"):
        variants["ciq_best"] = ciq["best"]["config"]
    if "helion_config" in report.get("helion", {}):
        variants["helion_autotune"] = {"helion_config": report["helion"]["helion_config"]}
    variants[ALTERNATIVE] = None
    record = remeasure(
        load_description(desc_path),
        variants,
        rounds=rounds,
        warmup_rounds=3,
        device="cuda",
        reference="ciq_best" if "ciq_best" in variants else "default",
    )
    measured = record["variants"]
    stats = ValidationConfig().corrected(len(COMPARISONS))
    comparisons = {}
    for candidate, baseline in COMPARISONS:
        if candidate in measured and baseline in measured:
            result = compare_samples(
                measured[baseline]["samples_ms"],
                measured[candidate]["samples_ms"],
                config=stats,
                measurement="interleaved",
            )
            comparisons[f"{candidate}_vs_{baseline}"] = result.to_dict()
    return {"variants": measured, "comparisons": comparisons, "skipped": record["skipped"]}


def markdown(report: dict[str, Any], desc_path: str) -> str:
    """A results fragment for docs/benchmarks.md."""
    desc = load_description(desc_path)
    sizes = desc.sizes
    flop = 2 * sizes.get("M", 0) * sizes.get("N", 0) * sizes.get("K", 0)
    ciq, helion = report.get("ciq", {}), report.get("helion", {})
    variants = report.get("remeasure", {}).get("variants", {})
    cost = {
        "ciq_best": (
            f"{ciq.get('n_trials')} evaluations in {ciq.get('search_wall_s', 0):.0f} s "
            f"(+ {ciq.get('derive_s', 0):.0f} s to derive the space)"
        ),
        "helion_autotune": (
            f"{helion.get('configs_searched')} configs in {helion.get('autotune_s', 0):.0f} s "
            f"({helion.get('process_s', 0):.0f} s with process start)"
        ),
    }
    lines = [
        f"### {desc.name}: ciq-tune vs Helion's autotuner",
        "",
        f"GPU tests: {report.get('tests', {}).get('summary', 'not run')}",
        "",
        "| variant | median ms | IQR ms | TFLOP/s | search |",
        "|---|---|---|---|---|",
    ]
    for name, stats in variants.items():
        tflops = flop / stats["median_ms"] / 1e9 if flop else float("nan")
        lines.append(
            f"| {name} | {stats['median_ms']:.4f} | {stats['iqr_ms']:.4f} | {tflops:.0f} "
            f"| {cost.get(name, '')} |"
        )
    lines += [
        "",
        "| comparison | speedup | 95% CI | Wilcoxon p | effect d | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for name, c in report.get("remeasure", {}).get("comparisons", {}).items():
        lines.append(
            f"| {name} | {c['speedup']:.3f} | [{c['speedup_ci_low']:.3f}, "
            f"{c['speedup_ci_high']:.3f}] | {c['p_value']:.2g} | {c['cohens_d']:.2f} "
            f"| {c['verdict']} |"
        )
    if ciq.get("best"):
        lines += ["", f"ciq-tune best: `{ciq['best'].get('helion_config')}`"]
    if "helion_config" in helion:
        lines += [f"Helion autotune best: `{json.dumps(helion['helion_config'])}`"]
    failed = [name for name in STEPS if "error" in report.get(name, {})]
    if failed:
        lines += ["", f"Failed steps: {failed} (errors in the JSON)."]
    return "\n".join(lines) + "\n"


def _step(report: dict[str, Any], name: str, fn: Callable[[], dict[str, Any]]) -> None:
    t0 = time.perf_counter()
    try:
        report[name] = fn()
    except Exception as exc:  # recorded: the remaining steps still run
        report[name] = {
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    report[name]["step_s"] = time.perf_counter() - t0
    print(
        f"{name}: {'failed' if 'error' in report[name] else 'done'} in "
        f"{report[name]['step_s']:.0f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--description", default=DESCRIPTION)
    parser.add_argument("--out", help="output path without suffix, e.g. $OUT/helion_matmul")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"subset of {STEPS}")
    parser.add_argument("--evals", type=int, default=40, help="ciq-tune evaluations")
    parser.add_argument("--budget-s", type=float, default=60, help="ciq-tune search time budget")
    parser.add_argument("--rounds", type=int, default=50, help="re-measurement rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tests-timeout-s", type=float, default=90)
    parser.add_argument("--autotune-timeout-s", type=float, default=120)
    parser.add_argument("--autotune-to", help=argparse.SUPPRESS)  # the autotune subprocess
    args = parser.parse_args()
    if args.autotune_to:
        _helion_autotune_main(args.description, args.autotune_to)
        return
    if not args.out:
        parser.error("--out is required")
    steps = args.steps.split(",")
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"--steps {unknown} are not among {STEPS}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    report: dict[str, Any] = {"description": args.description, "args": vars(args)}
    actions: dict[str, Callable[[], dict[str, Any]]] = {
        "tests": lambda: run_gpu_tests(out, args.tests_timeout_s),
        "ciq": lambda: search_with_ciq(args.description, args.evals, args.budget_s, args.seed),
        "helion": lambda: autotune_with_helion(
            args.description, out, args.autotune_timeout_s, args.seed
        ),
        "remeasure": lambda: remeasure_variants(args.description, report, args.rounds),
    }
    for name in STEPS:
        if name not in steps:
            continue
        _step(report, name, actions[name])
        Path(f"{out}.json").write_text(json.dumps(report, indent=1, default=str))
        try:
            Path(f"{out}.md").write_text(markdown(report, args.description))
        except Exception as exc:  # a fragment that cannot be written must not lose the JSON
            print(f"markdown: {type(exc).__name__}: {exc}", flush=True)
    print(Path(f"{out}.md").read_text() if Path(f"{out}.md").exists() else "no markdown")


if __name__ == "__main__":
    main()
