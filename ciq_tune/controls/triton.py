"""Triton's compile options as controls: launch keyword arguments plus ptxas `ptx_options`."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ciq_tune.controls.catalog import BaseCatalog
from ciq_tune.controls.catalog import Control
from ciq_tune.controls.ptxas import detect_ptxas
from ciq_tune.errors import ToolchainError


def _launch_option(
    name: str,
    values: tuple[Any, ...],
    help: str,
    *,
    ordered: bool = True,
    changes_numerics: bool = False,
) -> Control:
    """A keyword argument of a Triton launch as a control: its flag is its name, and its values
    are ordered unless said otherwise (Triton's options are mostly sizes)."""
    return Control(name, name, values, ordered, changes_numerics, help)


TRITON_CONTROLS: tuple[Control, ...] = (
    _launch_option("num_warps", (1, 2, 4, 8, 16), "warps per program"),
    _launch_option("num_stages", (1, 2, 3, 4, 5, 6), "software-pipelining stages of loops"),
    _launch_option(
        "maxnreg",
        (32, 40, 48, 64, 80, 96, 128, 168, 200, 255),
        "register limit per thread (.maxnreg)",
    ),
    _launch_option("num_ctas", (1, 2, 4), "CTAs per cluster (sm_90+)"),
    _launch_option(
        "enable_fp_fusion",
        (True, False),
        "contract multiply and add into FMA",
        ordered=False,
        changes_numerics=True,
    ),
)
TRITON_PRESETS: dict[str, dict[str, Any]] = {
    "wide": {"num_warps": 8, "num_stages": 3},
    "deep-pipeline": {"num_warps": 4, "num_stages": 4},
}
# ptxas options Triton already drives through its own options (enable_fp_fusion → --fmad,
# maxnreg → .maxnreg); forwarding them in ptx_options as well could contradict them.
_TRITON_OWNS = ("fmad", "maxrregcount")
PTX_OPTIONS = "ptx_options"


@dataclass(frozen=True)
class TritonCatalog(BaseCatalog):
    """Triton's options; `render` gives the keyword arguments of a Triton launch/config."""

    def render(self, controls: Mapping[str, Any]) -> dict[str, Any]:
        """Keyword arguments (``num_warps=8, ptx_options="--opt-level=2"``), validated first.

        Raises:
            InvalidControl: unknown control or value not allowed (see `validate`).
        """
        checked = self.validate(controls)
        out: dict[str, Any] = {}
        for name, value in checked.items():
            if name == PTX_OPTIONS:
                # Triton splits ptx_options on single spaces; rendered ptxas arguments never
                # contain spaces (values are checked by the ptxas catalog).
                out[name] = " ".join(self.sub[name].render(value))  # type: ignore[attr-defined]
            else:
                out[name] = value
        return out


def triton_ptxas() -> Path | None:
    """The ptxas bundled with the installed Triton (found without importing Triton)."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(next(iter(spec.submodule_search_locations))) / "backends/nvidia/bin/ptxas"
    return candidate if candidate.is_file() else None


def detect_triton(arch: str = "sm_90") -> TritonCatalog:
    """The catalog of the installed Triton; `ptx_options` come from Triton's bundled ptxas.

    Args:
        arch: target GPU; `num_ctas` > 1 needs sm_90 or newer and is dropped below that.

    Raises:
        ToolchainError: Triton is not installed.
    """
    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError as exc:
        raise ToolchainError("triton is not installed; `pip install ciq-tune[gpu]`") from exc
    controls = {c.name: c for c in TRITON_CONTROLS}
    if int(arch.removeprefix("sm_").rstrip("af")) < 90:
        del controls["num_ctas"]
    bundled = triton_ptxas()
    ptxas = detect_ptxas(bundled).without(_TRITON_OWNS)
    return TritonCatalog(
        compiler="triton",
        version=version,
        executable=str(bundled or ptxas.executable),
        controls=controls,
        preset_table=TRITON_PRESETS,
        sub={PTX_OPTIONS: ptxas},
    )
