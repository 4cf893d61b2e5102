"""The public device-code options of nvcc as controls, with ptxas options forwarded by -Xptxas."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any

from ciq_tune.controls.catalog import Catalog
from ciq_tune.controls.catalog import Control
from ciq_tune.controls.nvidia import FAST_COMPILE
from ciq_tune.controls.nvidia import FMAD
from ciq_tune.controls.nvidia import MAXRREGCOUNT
from ciq_tune.controls.nvidia import detect_controls
from ciq_tune.controls.nvidia import resolve_executable
from ciq_tune.controls.ptxas import detect_ptxas

NVCC_CONTROLS: tuple[Control, ...] = (
    Control(
        "use_fast_math",
        "--use_fast_math",
        (True,),
        changes_numerics=True,
        help="fast math library, implies ftz, approximate div/sqrt and FMA",
    ),
    Control(
        "ftz",
        "--ftz",
        (True, False),
        changes_numerics=True,
        help="flush single-precision denormals to zero",
    ),
    Control(
        "prec_div",
        "--prec-div",
        (True, False),
        changes_numerics=True,
        help="IEEE division (true) or a fast approximation (false)",
    ),
    Control(
        "prec_sqrt",
        "--prec-sqrt",
        (True, False),
        changes_numerics=True,
        help="IEEE square root (true) or a fast approximation (false)",
    ),
    FMAD,
    Control(
        "extra_device_vectorization",
        "--extra-device-vectorization",
        (True,),
        help="more aggressive vectorisation in the NVVM optimizer",
    ),
    Control(
        "restrict",
        "--restrict",
        (True,),
        # Marked numerics-changing because results differ whenever kernel pointers alias.
        changes_numerics=True,
        help="assume kernel pointer parameters do not alias (wrong results if they do)",
    ),
    MAXRREGCOUNT,
    FAST_COMPILE,
)
NVCC_PRESETS: dict[str, dict[str, Any]] = {
    "vectorize": {"extra_device_vectorization": True},
    "fast-math": {"use_fast_math": True},
    "ieee-off": {"ftz": True, "prec_div": False, "prec_sqrt": False},
}
# ptxas options that nvcc already sets through its own options of the same meaning; forwarding
# them as well could contradict the nvcc option.
_NVCC_OWNS = (FMAD.name, MAXRREGCOUNT.name, FAST_COMPILE.name)


def detect_nvcc(path: str | Path | None = None) -> Catalog:
    """The catalog of the installed nvcc: its own options plus the ptxas next to it (forwarded
    with ``-Xptxas``, nested under ``ptxas``).

    Args:
        path: the nvcc executable (default: ``nvcc`` on PATH).

    Raises:
        ToolchainError: nvcc (or the ptxas in its folder) is missing or reports no version.
    """
    return _detect(resolve_executable(path, "nvcc"))


@functools.lru_cache(maxsize=8)
def _detect(executable: str) -> Catalog:
    arch_option = "--gpu-architecture"
    catalog, options = detect_controls(
        executable, "nvcc", NVCC_CONTROLS, NVCC_PRESETS, arch_option=arch_option
    )
    sibling = Path(executable).parent / "ptxas"
    ptxas = detect_ptxas(sibling if sibling.is_file() else None).without(_NVCC_OWNS)
    # An nvcc whose help lists no GPU architectures targets those of its ptxas.
    archs = catalog.archs if arch_option in options else ptxas.archs
    return replace(catalog, archs=archs, sub={"ptxas": ptxas}, forward_flag="-Xptxas")
