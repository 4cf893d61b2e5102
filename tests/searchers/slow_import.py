"""A module that takes `SECONDS` to import: a benchmark worker's slow start (CUDA, torch)."""

from __future__ import annotations

import time

SECONDS = 4.0
time.sleep(SECONDS)
