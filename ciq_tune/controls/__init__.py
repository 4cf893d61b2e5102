"""Compiler-control catalogs (ptxas, nvcc, Triton) detected from the installed toolchain, and
the controls file that records a tuned control set."""

from __future__ import annotations

from collections.abc import Sequence

from ciq_tune.controls.catalog import BaseCatalog
from ciq_tune.controls.catalog import Catalog
from ciq_tune.controls.catalog import Control
from ciq_tune.controls.nvcc import detect_nvcc
from ciq_tune.controls.ptxas import detect_ptxas
from ciq_tune.controls.triton import TritonCatalog
from ciq_tune.controls.triton import detect_triton

__all__ = [
    "BaseCatalog",
    "Catalog",
    "Control",
    "TritonCatalog",
    "detect_catalog",
    "detect_nvcc",
    "detect_ptxas",
    "detect_triton",
]


def detect_catalog(
    name: str, *, arch: str = "sm_90", vendor_controls_files: Sequence[str] = ()
) -> BaseCatalog:
    """The installed catalog called `name` (``ptxas``, ``nvcc`` or ``triton``); ptxas offers
    `vendor_controls_files` as an opaque choice (`detect_ptxas`)."""
    if name == "ptxas":
        return detect_ptxas(vendor_controls_files=vendor_controls_files)
    if name == "nvcc":
        return detect_nvcc()
    if name == "triton":
        return detect_triton(arch)
    raise ValueError(f"`name` must be one of 'ptxas', 'nvcc', 'triton', got name={name!r}")
