"""Whether a refactor changed behaviour: deterministic fixtures run on this tree and on an
earlier commit, their outputs compared.

    python scripts/same_outputs.py 57bed89

The fixtures: every engine strategy asked and told 60 times on a fixed space and objective
(seed 3; the proposals and the engine state, records' timings left out), and ``ciq-tune tune``
on the PTX example with one worker (evaluations, controls file, validation and printed lines,
timings and paths left out) and on three inputs it refuses. Prints one row per fixture and
exits 1 when any differs. Runs on a CPU in a few minutes; uses this tree's Python.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ENGINES = """
import hashlib, json
from ciq_tune import space as ss
from ciq_tune.engine import STRATEGIES, Budget, create_engine

SPACE = {"a": ss.range(0, 15), "b": ss.choice(["x", "y", "z"]),
         "c": ss.choice([1, 2, 4, 8, 16]), "d": ss.range(0, 9)}
for name in sorted(STRATEGIES):
    objectives = ["t", "u"] if name in ("nsga2", "nsga3") else ["t"]
    engine = create_engine(name, SPACE, objectives, budget=Budget(max_evaluations=60), seed=3)
    asked = []
    while not engine.finished:
        candidate = engine.ask()
        if candidate is None:
            break
        c = candidate.config
        t = (c["a"] - 7) ** 2 + {"x": 0, "y": 3, "z": 1}[c["b"]] + abs(c["c"] - 4) + c["d"] / 10
        values = [t, (c["a"] - 2) ** 2 + c["d"]] if len(objectives) == 2 else t
        asked.append([candidate.id, c, candidate.origin])
        engine.tell(candidate.id, values, status="error" if c["d"] == 9 else "ok")
    state = engine.get_state()
    state.pop("elapsed_s")
    for record in state["records"]:
        record.pop("elapsed_s")
    print(json.dumps({name: [asked, state]}, sort_keys=True, default=str))
"""

TUNE = [
    ("tune ptx", ["--budget", "30", "--num-cpus", "1", "--tracking", "none"]),
    ("tune --exhaustive (refused)", ["--budget", "30", "--exhaustive", "--tracking", "none"]),
    ("tune --budget 0 (refused)", ["--budget", "0"]),
]
TIMINGS = re.compile(r"evals/s|s after|ready|engine .* s|\d+\.\d+ s\b")


def _run(tree: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def fixtures(tree: Path, out: Path) -> dict[str, str]:
    """Each fixture's outputs on `tree`, as a digest."""
    digests: dict[str, str] = {}
    engines = _run(tree, ["-c", ENGINES], tree)
    for line in engines.stdout.splitlines():
        ((name, outputs),) = json.loads(line).items()
        digests[f"engine {name}"] = _digest(outputs)
    description = tree / "examples/kernels/ptx/spill.yaml"
    for label, args in TUNE:
        folder = out / label.split()[1]
        done = _run(
            tree, ["-m", "ciq_tune.cli", "tune", str(description), *args, "--out", str(folder)], out
        )
        printed = [
            line.replace(str(folder), "OUT").replace(str(tree), "ROOT")
            for line in (done.stdout + done.stderr).splitlines()
            if not TIMINGS.search(line) and "Traceback" not in line
        ]
        files: dict[str, object] = {}
        if (folder / "evaluations.csv").exists():
            with (folder / "evaluations.csv").open() as handle:
                rows = [
                    {k: v for k, v in r.items() if k != "elapsed_s"} for r in csv.DictReader(handle)
                ]
            files["evaluations"] = rows
            files["validation"] = json.loads((folder / "validation.json").read_text())
            controls = next(folder.glob("*.controls.yaml")).read_text().splitlines()
            files["controls"] = [
                text for text in controls if not re.search(r"created|date|host|source:", text)
            ]
        digests[label] = _digest([done.returncode, printed, files])
    return digests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="the earlier commit (e.g. the one before a refactor)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(before), args.before],
            cwd=ROOT,
            check=True,
        )
        try:
            (Path(tmp) / "a").mkdir()
            (Path(tmp) / "b").mkdir()
            old = fixtures(before, Path(tmp) / "a")
            new = fixtures(ROOT, Path(tmp) / "b")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT)
    print(f"| fixture | {args.before} | this tree | same |\n|---|---|---|---|")
    for name in sorted(old.keys() | new.keys()):
        a, b = old.get(name, "-"), new.get(name, "-")
        print(f"| {name} | {a} | {b} | {'yes' if a == b else 'NO'} |")
    return 0 if old == new else 1


if __name__ == "__main__":
    sys.exit(main())
