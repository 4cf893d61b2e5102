"""What ptxas and nvcc share: the controls both offer, finding the executable, detection."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ciq_tune.controls.catalog import Catalog
from ciq_tune.controls.catalog import Control
from ciq_tune.controls.catalog import OptionHelp
from ciq_tune.controls.catalog import parse_help
from ciq_tune.controls.catalog import parse_version
from ciq_tune.controls.catalog import probe
from ciq_tune.controls.catalog import supported
from ciq_tune.errors import InvalidControl
from ciq_tune.errors import ToolchainError

MAXRREGCOUNT = Control(
    "maxrregcount",
    "--maxrregcount",
    (32, 40, 48, 56, 64, 72, 80, 96, 128, 168, 200, 255),
    ordered=True,
    help="register limit per thread (ignored for kernels with launch bounds)",
)
FMAD = Control(
    "fmad",
    "--fmad",
    (True, False),
    changes_numerics=True,
    help="contract multiply and add into FMA (default true)",
)
FAST_COMPILE = Control(
    "fast_compile",
    "--Ofast-compile",
    ("0", "min", "mid", "max"),
    ordered=True,
    help="trade code quality for compile speed (-Ofc)",
)


def resolve_executable(path: str | Path | None, name: str) -> str:
    """The absolute path of compiler `name`: `path` when given, else the one on PATH.

    Raises:
        ToolchainError: `path` is not a file, or `name` is not on PATH.
    """
    if path is not None:
        candidate = Path(path)
        if not candidate.is_file():
            raise ToolchainError(f"`path`={str(path)!r} is not a {name} executable")
        return str(candidate.resolve())
    found = shutil.which(name)
    if found is None:
        raise ToolchainError(
            f"{name} is not on PATH; install the CUDA toolkit (or `pip install nvidia-cuda-nvcc`) "
            f"or pass its location as `path`"
        )
    return str(Path(found).resolve())


def detect_controls(
    executable: str,
    name: str,
    controls: Sequence[Control],
    presets: Mapping[str, Mapping[str, Any]],
    arch_option: str,
) -> tuple[Catalog, dict[str, OptionHelp]]:
    """Ask `executable` for its version and options: the catalog of the `controls` its help
    lists, the ``sm_*`` GPUs its `arch_option` allows (none when its help has no such option)
    and the `presets`.

    Returns:
        The catalog, and the parsed ``--help`` options (for what a caller adds to it).

    Raises:
        ToolchainError: the executable reports no version (it is not `name`).
    """
    try:
        version = parse_version(probe(executable, "--version"))
    except InvalidControl as exc:
        raise ToolchainError(f"`{executable}` does not look like {name}: {exc}") from exc
    options = parse_help(probe(executable, "--help"))
    kept = {}
    for control in controls:
        found = supported(control, options)
        if found is not None:
            kept[found.name] = found
    gpu = options.get(arch_option)
    archs = tuple(a for a in (gpu.allowed or ()) if a.startswith("sm_")) if gpu else ()
    return Catalog(name, version, executable, kept, archs, presets), options
