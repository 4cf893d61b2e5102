"""Command line of `bench.gpu_suite` (see its docstring): python3 scripts/gpu/suite.py --help."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.gpu_suite import main

if __name__ == "__main__":
    sys.exit(main())
