"""The public options of ptxas (the PTX → SASS assembler) as controls, and their detection."""

from __future__ import annotations

import functools
from collections.abc import Sequence
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
from ciq_tune.errors import ControlsFileError
from ciq_tune.errors import InvalidControl
from ciq_tune.strict_io import KERNEL_SOURCE
from ciq_tune.strict_io import sha256_file

# Options that change code generation but not the kernel's launch contract. Left out on
# purpose: --override-directive-values and --maxntid (they can raise the register count above
# what the kernel's declared block size can launch with), debug/instrumentation options, and
# anything naming a file other than a user's own --apply-controls file.
PTXAS_CONTROLS: tuple[Control, ...] = (
    Control("opt_level", "--opt-level", (0, 1, 2, 3), ordered=True, help="optimisation level"),
    Control(
        "register_usage_level",
        "--register-usage-level",
        tuple(range(11)),
        ordered=True,
        help="aggressiveness of optimisations that raise register use (default 5)",
    ),
    MAXRREGCOUNT,
    Control(
        "minnctapersm",
        "--minnctapersm",
        (1, 2, 3, 4, 6, 8),
        ordered=True,
        help="minimum CTAs per SM the register budget must allow",
    ),
    Control(
        "def_load_cache",
        "--def-load-cache",
        ("ca", "cg", "cs", "lu", "cv"),
        help="default cache modifier of global/generic loads (-dlcm)",
    ),
    Control(
        "def_store_cache",
        "--def-store-cache",
        ("wb", "cg", "cs", "wt"),
        help="default cache modifier of global/generic stores (-dscm)",
    ),
    Control(
        "allow_expensive_optimizations",
        "--allow-expensive-optimizations",
        (True, False),
        help="optimisations that cost compile time and memory (on by default at -O2+)",
    ),
    FMAD,
    FAST_COMPILE,
    Control(
        "extensible_whole_program",
        "--extensible-whole-program",
        (True,),
        help="extensible whole-program mode (-ewp)",
    ),
    Control(
        "disable_optimizer_constants",
        "--disable-optimizer-constants",
        (True,),
        help="do not use the optimizer constant bank",
    ),
    Control(
        "dont_merge_basicblocks",
        "--dont-merge-basicblocks",
        (True,),
        help="keep consecutive basic blocks apart",
    ),
    Control(
        "return_at_end",
        "--return-at-end",
        (True,),
        help="keep the final return instruction",
    ),
    Control(
        "optimize_float_atomics",
        "--optimize-float-atomics",
        (True,),
        changes_numerics=True,
        help="optimise floating-point atomics (may change rounding)",
    ),
)

# Control sets worth evaluating before any search (warm start). Each is a point of the space.
PTXAS_PRESETS: dict[str, dict[str, Any]] = {
    "expensive-opts": {"opt_level": 3, "allow_expensive_optimizations": True},
    "low-register-pressure": {"register_usage_level": 0},
    "lean-registers": {"register_usage_level": 2, "allow_expensive_optimizations": True},
    "bypass-l1-loads": {"def_load_cache": "cg"},
    "no-fma": {"fmad": False},
}
APPLY_CONTROLS_FLAG = "--apply-controls"


class VendorControlsFile(Control):
    """A user's own vendor compiler-controls file, passed opaquely with ``--apply-controls``.

    The file is never read beyond hashing its bytes for provenance; its value in a controls
    file must be one of the paths registered when the catalog was detected, so a controls
    file cannot make ptxas open a path the user did not name.
    """

    def render(self, value: Any) -> list[str]:
        return [self.flag, str(value)]


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a vendor controls file's bytes (a regular file under the size limit)."""
    kind = replace(KERNEL_SOURCE, what="vendor controls file", error=ControlsFileError)
    return sha256_file(path, kind)


def detect_ptxas(
    path: str | Path | None = None, *, vendor_controls_files: Sequence[str | Path] = ()
) -> Catalog:
    """The catalog of the installed ptxas: only options its `--help` lists, at its version.

    Args:
        path: the ptxas executable (default: ``ptxas`` on PATH).
        vendor_controls_files: the user's own vendor controls files to offer as an opaque
            choice (``apply_controls``); needs a ptxas whose help lists ``--apply-controls``.

    Raises:
        ToolchainError: ptxas is not found or reports no version.
        InvalidControl: vendor controls files were given but this ptxas cannot apply them, or a
            file does not exist.
    """
    executable = resolve_executable(path, "ptxas")
    files = tuple(str(Path(f).resolve()) for f in vendor_controls_files)
    return _detect(executable, files)


@functools.lru_cache(maxsize=16)
def _detect(executable: str, files: tuple[str, ...]) -> Catalog:
    catalog, options = detect_controls(
        executable, "ptxas", PTXAS_CONTROLS, PTXAS_PRESETS, arch_option="--gpu-name"
    )
    if not files:
        return catalog
    if APPLY_CONTROLS_FLAG not in options:
        raise InvalidControl(
            f"ptxas {catalog.version} ({executable}) has no {APPLY_CONTROLS_FLAG} option, so "
            f"`vendor_controls_files`={list(files)} cannot be applied; it needs ptxas >= 13.3"
        )
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        raise InvalidControl(f"`vendor_controls_files` {missing} do not exist")
    vendor = VendorControlsFile(
        "apply_controls",
        APPLY_CONTROLS_FLAG,
        files,
        help="a user's own vendor controls file, passed opaquely",
    )
    return replace(catalog, controls={**catalog.controls, vendor.name: vendor})
