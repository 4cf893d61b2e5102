"""Makes torch and Triton unimportable in every Python process that has this folder on its
PYTHONPATH (the isolated workers too): the CUDA C++ path must run without them."""

from __future__ import annotations

import importlib.abc
import sys

BLOCKED = ("torch", "triton")


class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname.split(".")[0] in BLOCKED:
            raise ImportError(f"{fullname} is blocked: this process runs without torch")
        return None


sys.meta_path.insert(0, _Blocked())
