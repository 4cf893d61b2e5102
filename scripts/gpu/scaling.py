"""Command line of `bench.scaling` (see its docstring): python3 scripts/gpu/scaling.py --help."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.scaling import main

if __name__ == "__main__":
    main()
