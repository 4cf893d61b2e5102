"""Run a test's script under Triton's interpreter in a fresh Python: the interpreter must be on
before a kernel module is imported, so a test that launches kernels in-process cannot set it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run_interpreted(script: str, *args: str, timeout: float = 300) -> Any:
    """Run `script` (dedented) with `args` as ``sys.argv[1:]``, ``TRITON_INTERPRET=1`` and the
    repository on the path; the JSON of its last line of output. Fails the test, with its
    stderr's tail, when it exits non-zero."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])
