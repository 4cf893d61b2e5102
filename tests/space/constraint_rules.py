"""A module-level constraint, saved by reference ("module:function") with a space."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def small_tile(config: Mapping[str, Any]) -> bool:
    return bool(config["BM"] * config["BN"] <= 1024)
