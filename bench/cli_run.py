"""One ``ciq-tune tune`` run as a user types it, timed from the command to its controls file.

    python3 -m bench.cli_run examples/kernels/triton/matmul_persistent.yaml --out "$OUT/mm" \
        -- --budget 100 --validate-top 3
    python3 -m bench.cli_run tests/…/row_scale.yaml --dry-run --out /tmp/cli  # CPU

Runs ``python -m ciq_tune.cli tune DESC … --out OUT/run`` in a subprocess from a cold Triton
cache while NVML's utilisation is sampled (`objectives._gpu.UtilizationSampler`), and reads its
output lines as they arrive. Reports:

- ``wall_s``: the command's start to its exit (the controls file written);
- ``first_result_s``: the command's start to the first progress line that counts an evaluation
  (the first evaluation prints one at once);
- ``search_s``: the command's start to the search's throughput line (validation follows);
- ``nvml_busy_search_pct`` and ``nvml_busy_run_pct``: mean GPU utilisation over the search and
  over the whole run;
- per re-measured candidate of OUT/run/validation.json: its value in the search, its re-measured
  median and their ratio (re-measured / search; 1.0: the search's value predicted it).

Prints one markdown row group and writes OUT/cli_run.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.gpu_suite import fresh_triton_cache
from objectives import load_description
from objectives._gpu import UtilizationSampler

PROGRESS = re.compile(r"^(\d+)(?:/\d+)? evaluations, best ")
THROUGHPUT = re.compile(r"^\d+ evaluations in [\d.]+ s = ")


def run(desc_path: Path, out: Path, options: list[str], *, dry_run: bool) -> dict[str, Any]:
    """The CLI run in a subprocess, with its timings, NVML utilisation and validation values."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["TRITON_CACHE_DIR"] = str(fresh_triton_cache(out, "run"))
    command = [sys.executable, "-m", "ciq_tune.cli", "tune", str(desc_path), *options]
    command += ["--tracking", "none", "--out", str(out / "run")]
    if dry_run:
        env["TRITON_INTERPRET"] = "1"
        command += ["--num-cpus", "2", "--validate-repetitions", "5"]
    marks: dict[str, float] = {}
    log = []
    with UtilizationSampler() as sampler:
        t0_wall, t0 = time.time(), time.perf_counter()
        with subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                now = time.perf_counter() - t0
                log.append(f"{now:8.2f} {line.rstrip()}")
                found = PROGRESS.match(line)
                if found and int(found.group(1)) > 0:
                    marks.setdefault("first_result_s", now)
                if THROUGHPUT.match(line):
                    marks.setdefault("search_s", now)
            code = proc.wait()
        wall_s = time.perf_counter() - t0
    (out / "cli_run.log").write_text("\n".join(log) + "\n")
    if code != 0:
        raise RuntimeError(f"ciq-tune exited {code}: {' | '.join(log[-5:])}")
    search_end = t0_wall + marks.get("search_s", wall_s)
    return {
        "command": " ".join(["ciq-tune", "tune", str(desc_path), *options]),
        "wall_s": wall_s,
        **marks,
        "nvml_busy_search_pct": _mean_pct(sampler.summary(since=t0_wall, until=search_end)),
        "nvml_busy_run_pct": _mean_pct(sampler.summary()),
        # Under which clock and power the search's rounds and the validation's ran.
        "search_conditions": _conditions(sampler.summary(since=t0_wall, until=search_end)),
        "validation_conditions": _conditions(sampler.summary(since=search_end)),
        "candidates": search_vs_remeasured(out / "run", load_description(desc_path).metric),
    }


def _mean_pct(summary: dict[str, Any]) -> float | None:
    gpus = summary["gpus"]
    return sum(g["mean_pct"] for g in gpus.values()) / len(gpus) if gpus else None


def _conditions(summary: dict[str, Any]) -> dict[str, float | None]:
    """The first GPU's mean SM clock (MHz) and power (W) over a window (None: no samples)."""
    gpu: dict[str, Any] = next(iter(summary["gpus"].values()), {})
    return {"sm_clock_mhz": gpu.get("mean_sm_clock_mhz"), "power_w": gpu.get("mean_power_w")}


def search_vs_remeasured(run_dir: Path, metric: str) -> list[dict[str, Any]]:
    """Per re-measured candidate of RUN/validation.json: search value, re-measured median."""
    path = run_dir / "validation.json"
    if not path.exists():
        return []
    rows = []
    for c in json.loads(path.read_text())["candidates"]:
        searched = (c.get("search_values") or {}).get(metric)
        measured = (c.get("candidate") or {}).get("median")
        rows.append(
            {
                "rank": c["rank"],
                "verdict": c.get("verdict"),
                "search": searched,
                "remeasured": measured,
                "ratio": measured / searched if searched and measured else None,
            }
        )
    return rows


def table(result: dict[str, Any]) -> str:
    """The published rows: whole-run figures, then the search-vs-re-measured values."""

    def fmt(value: Any, spec: str) -> str:
        return "n/a" if value is None else format(value, spec)

    lines = [
        f"`{result['command']}`",
        "",
        "| wall s | first result s | search s | NVML busy search % | NVML busy run % |",
        "|---|---|---|---|---|",
        f"| {result['wall_s']:.1f} | {fmt(result.get('first_result_s'), '.1f')} | "
        f"{fmt(result.get('search_s'), '.1f')} | {fmt(result['nvml_busy_search_pct'], '.0f')} | "
        f"{fmt(result['nvml_busy_run_pct'], '.0f')} |",
        "",
        "| candidate | verdict | search value | re-measured | re-measured / search |",
        "|---|---|---|---|---|",
    ]
    searched, validated = result.get("search_conditions"), result.get("validation_conditions")
    if searched and validated:
        lines[5:5] = [
            "",
            "| window | mean SM clock MHz | mean power W |",
            "|---|---|---|",
            *(
                f"| {name} | {fmt(c['sm_clock_mhz'], '.0f')} | {fmt(c['power_w'], '.0f')} |"
                for name, c in (("search", searched), ("after it", validated))
            ),
        ]
    for c in result["candidates"]:
        lines.append(
            f"| #{c['rank']} | {c['verdict']} | {fmt(c['search'], '.5g')} | "
            f"{fmt(c['remeasured'], '.5g')} | {fmt(c['ratio'], '.3f')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("description", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="CPU: Triton's interpreter")
    argv = sys.argv[1:] if argv is None else argv
    # Everything after `--` goes to `ciq-tune tune` as it is.
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.options = argv[cut + 1 :]
    args.out.mkdir(parents=True, exist_ok=True)
    result = run(args.description, args.out, args.options, dry_run=args.dry_run)
    (args.out / "cli_run.json").write_text(json.dumps(result, indent=1, default=str))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
