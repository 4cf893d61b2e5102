"""The controls file: a reviewable YAML record of a tuned control set, its rendered arguments
and its provenance, re-validated against the installed catalogs whenever it is used."""

from __future__ import annotations

import datetime
import shutil
import subprocess
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from typing import Literal

import yaml
from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field
from pydantic import ValidationError

from ciq_tune.controls.catalog import BaseCatalog
from ciq_tune.controls.matrix import Matrix
from ciq_tune.controls.nvcc import detect_nvcc
from ciq_tune.controls.ptxas import detect_ptxas
from ciq_tune.controls.ptxas import file_sha256
from ciq_tune.controls.triton import PTX_OPTIONS
from ciq_tune.controls.triton import detect_triton
from ciq_tune.errors import CiqTuneError
from ciq_tune.errors import ControlsFileError
from ciq_tune.errors import InvalidControl
from ciq_tune.strict_io import KERNEL_SOURCE
from ciq_tune.strict_io import FileKind
from ciq_tune.strict_io import load_yaml
from ciq_tune.strict_io import sha256_file

SCHEMA: Literal["ciq-tune/controls"] = "ciq-tune/controls"
# Version 2 adds `matrix` (tuned shapes, one entry per configuration, the launch-time rule);
# version 1 files still load.
SCHEMA_VERSION: Literal[2] = 2
# A controls file is a few kilobytes; refuse anything large before parsing it (bytes).
MAX_FILE_BYTES = 1_000_000
# Seconds to wait for nvidia-smi to describe the GPU.
_SMI_TIMEOUT_S = 20
CatalogName = Literal["ptxas", "nvcc", "triton"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KernelInfo(_Strict):
    """Which kernel the controls were tuned for."""

    name: str
    kind: Literal["ptx", "cuda", "triton", "helion"]
    source: str
    source_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    entry: str | None = None
    arch: str


class GpuInfo(_Strict):
    """The GPU the controls were measured on."""

    model: str
    compute_capability: str
    driver: str


class Benchmark(_Strict):
    """What was measured: the metric and the problem (shapes and dtypes of the inputs)."""

    metric: str
    mode: Literal["min", "max"]
    sizes: dict[str, int] = Field(default_factory=dict)
    shapes: dict[str, list[int]] = Field(default_factory=dict)
    dtypes: dict[str, str] = Field(default_factory=dict)
    # Each input's shape as the description writes it (size names or ints) and the
    # description's `arguments`: how `ciq_tune.runtime.tuned` reads a launch's sizes.
    dims: dict[str, list[str | int]] = Field(default_factory=dict)
    arguments: dict[str, str] = Field(default_factory=dict)
    # How L2 was found when timing: flushed ("cold") or as the kernel left it ("warm").
    l2: Literal["cold", "warm"] = "cold"


class Remeasured(_Strict):
    """The shipped configuration and the baseline re-measured after the search: interleaved
    rounds of the measurement protocol (docs/validation.md), medians with their bootstrap CI.
    These are the numbers to quote."""

    baseline_median: float
    baseline_ci: tuple[float, float]
    best_median: float
    best_ci: tuple[float, float]
    speedup: float
    speedup_ci: tuple[float, float]
    rounds: int
    confidence: float


class Scores(_Strict):
    """The tuned value of the metric against the compiler-default baseline.

    Attributes:
        baseline: the search's own value of the baseline (one round of the measurement
            protocol during the search).
        best: the search's own value of the shipped configuration (optimistic: the best of many
            noisy rounds is partly the luckiest).
        improvement_pct: from the search's values.
        remeasured: both re-measured after the search, with CIs (None when not re-measured).
    """

    baseline: float | None
    best: float
    improvement_pct: float | None = None
    remeasured: Remeasured | None = None


class ControlsFile(_Strict):
    """One tuned control set with provenance. See docs/controls-file.md for the schema."""

    schema_: Literal["ciq-tune/controls"] = Field(default=SCHEMA, alias="schema")
    schema_version: Literal[1, 2] = SCHEMA_VERSION
    created: str
    tool: dict[str, str]
    kernel: KernelInfo
    compilers: dict[CatalogName, dict[str, Any]]
    controls: dict[CatalogName, dict[str, Any]]
    rendered: dict[CatalogName, list[str] | dict[str, Any]]
    params: dict[str, Any] = Field(default_factory=dict)
    vendor_controls_files: dict[str, str] = Field(default_factory=dict)
    gpu: GpuInfo | None = None
    benchmark: Benchmark
    scores: Scores
    validation: dict[str, Any] | None = None
    matrix: Matrix | None = None
    # Controls of the search's winner left out because a fresh measurement without each was
    # as good (`ciq_tune.controls.simplify`); informational, never applied.
    dropped_controls: dict[CatalogName, dict[str, Any]] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def detect_gpu() -> GpuInfo | None:
    """Model, compute capability and driver of GPU 0 from nvidia-smi; None without a GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    query = "--query-gpu=name,compute_cap,driver_version"
    try:
        out = subprocess.run(
            [smi, query, "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=_SMI_TIMEOUT_S,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    fields = [f.strip() for f in out.splitlines()[0].split(",")] if out.strip() else []
    if len(fields) != 3:
        return None
    return GpuInfo(model=fields[0], compute_capability=fields[1], driver=fields[2])


def installed_catalog(
    name: str, arch: str, vendor_controls_files: Sequence[str | Path] = ()
) -> BaseCatalog:
    """The installed catalog `name`, with the given vendor controls files allowed (ptxas)."""
    if name == "ptxas":
        return detect_ptxas(vendor_controls_files=vendor_controls_files)
    if name == "nvcc":
        return detect_nvcc()
    return detect_triton(arch)


def render_controls(
    catalog: BaseCatalog, controls: Mapping[str, Any]
) -> list[str] | dict[str, Any]:
    """Argument list (ptxas, nvcc) or launch keyword arguments (Triton) of a control set."""
    rendered: list[str] | dict[str, Any] = catalog.render(controls)  # type: ignore[attr-defined]
    return rendered


def build(
    *,
    kernel: KernelInfo,
    catalogs: Mapping[str, BaseCatalog],
    controls: Mapping[str, Mapping[str, Any]],
    benchmark: Benchmark,
    scores: Scores,
    params: Mapping[str, Any] | None = None,
    gpu: GpuInfo | None = None,
    validation: Mapping[str, Any] | None = None,
    matrix: Matrix | None = None,
    dropped_controls: Mapping[str, Mapping[str, Any]] | None = None,
) -> ControlsFile:
    """A controls file for `controls` (per catalog name), rendered by `catalogs`.

    Args:
        kernel: the kernel's identity (name, source hash, arch).
        catalogs: catalog name → the catalog the controls were tuned with (a catalog without
            controls is recorded too: the compiler the kernel was tuned under).
        controls: catalog name → chosen control set.
        benchmark: the metric and problem definition.
        scores: tuned metric against the baseline.
        params: chosen kernel parameters (Triton/CUDA tile sizes; empty for PTX).
        gpu: the GPU measured on, when there was one.
        validation: `ciq_tune.validation` statistics (`to_dict()` output), stored as given.
        matrix: the tuned shapes and per-shape configurations (a description with `shapes`);
            each entry's `rendered` is filled in here from its `controls`.
        dropped_controls: controls of the search's winner that simplification left out.
    """
    from ciq_tune._version import __version__

    rendered: dict[str, Any] = {}
    checked: dict[str, Any] = {}
    vendor: dict[str, str] = {}
    for name, chosen in controls.items():
        checked[name] = catalogs[name].validate(chosen)
        rendered[name] = render_controls(catalogs[name], checked[name])
        for path in _vendor_files(name, checked[name]):
            vendor[path] = file_sha256(path)
    return ControlsFile(
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        tool={"name": "ciq-tune", "version": __version__},
        kernel=kernel,
        compilers={name: catalog.describe() for name, catalog in catalogs.items()},  # type: ignore[misc]
        controls=checked,  # type: ignore[arg-type]
        rendered=rendered,  # type: ignore[arg-type]
        params=dict(params or {}),
        vendor_controls_files=vendor,
        gpu=gpu,
        benchmark=benchmark,
        scores=scores,
        validation=None if validation is None else dict(validation),
        matrix=None if matrix is None else _render_matrix(matrix, catalogs),
        dropped_controls={k: dict(v) for k, v in (dropped_controls or {}).items()},  # type: ignore[misc]
    )


def _render_matrix(matrix: Matrix, catalogs: Mapping[str, BaseCatalog]) -> Matrix:
    entries = []
    for entry in matrix.entries:
        checked = {name: catalogs[name].validate(c) for name, c in entry.controls.items()}
        rendered = {name: render_controls(catalogs[name], c) for name, c in checked.items()}
        entries.append(entry.model_copy(update={"controls": checked, "rendered": rendered}))
    return matrix.model_copy(update={"entries": entries})


def _vendor_files(name: str, controls: Mapping[str, Any]) -> list[str]:
    """Paths of vendor controls files a (validated) control set passes to ptxas."""
    ptxas = (
        controls
        if name == "ptxas"
        else controls.get("ptxas" if name == "nvcc" else PTX_OPTIONS, {})
    )
    value = ptxas.get("apply_controls") if isinstance(ptxas, Mapping) else None
    return [value] if isinstance(value, str) else []


def write(path: str | Path, controls_file: ControlsFile) -> Path:
    """Write a controls file as YAML (keys in schema order) and return its path."""
    path = Path(path)
    data = controls_file.model_dump(mode="json", by_alias=True)
    header = (
        "# ciq-tune controls file (docs/controls-file.md). Review `controls`; `rendered` is\n"
        "# what `ciq-tune apply` passes, re-derived from `controls` and checked on every load.\n"
    )
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def load(path: str | Path) -> ControlsFile:
    """Read and schema-check a controls file (no compiler is consulted yet).

    Raises:
        ControlsFileError: unreadable, too large, not YAML, or not of this schema (the message
            names the file and the field).
    """
    path = Path(path)
    data = load_yaml(path, FileKind("controls file", MAX_FILE_BYTES, ControlsFileError))
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ControlsFileError(f"{path}: not a ciq-tune controls file (needs `schema: {SCHEMA}`)")
    try:
        return ControlsFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"field `{'.'.join(str(p) for p in err['loc'])}`: {err['msg']}" for err in exc.errors()
        )
        raise ControlsFileError(f"{path}: invalid controls file: {problems}") from None


def render(
    controls_file: ControlsFile, *, vendor_controls_files: Sequence[str | Path] = ()
) -> dict[str, list[str] | dict[str, Any]]:
    """Re-render the file's controls with the installed catalogs.

    The stored `rendered` section is never used as arguments: it must equal what the catalog
    renders from `controls`, or the file has been edited inconsistently (tampered).

    Args:
        controls_file: a loaded controls file.
        vendor_controls_files: vendor controls files the user allows this file to pass; a file
            naming any other path for ``--apply-controls`` is rejected.

    Raises:
        ControlsFileError: a control is not in the installed catalog, a value is not allowed, a
            vendor controls file is not allowed or changed, or `rendered` does not match.
    """
    allowed = {str(Path(p).resolve()) for p in vendor_controls_files}
    for vendor_path, digest in controls_file.vendor_controls_files.items():
        if vendor_path not in allowed:
            raise ControlsFileError(
                f"the controls file passes the vendor controls file {vendor_path!r} to ptxas; "
                "allow it explicitly (`--vendor-controls PATH`) if you trust it"
            )
        if file_sha256(vendor_path) != digest:
            raise ControlsFileError(f"vendor controls file {vendor_path!r} changed since tuning")
    out: dict[str, list[str] | dict[str, Any]] = {}
    for name, controls in controls_file.controls.items():
        try:
            catalog = installed_catalog(name, controls_file.kernel.arch, sorted(allowed))
            rendered = render_controls(catalog, controls)
        except (InvalidControl, CiqTuneError) as exc:
            raise ControlsFileError(f"`controls.{name}` is not valid here: {exc}") from exc
        stored = controls_file.rendered.get(name)
        if stored != rendered:
            raise ControlsFileError(
                f"`rendered.{name}` {stored!r} does not match what `controls.{name}` renders to "
                f"({rendered!r}); the file was edited by hand or tampered with"
            )
        for vendor_path in _vendor_files(name, controls):
            if vendor_path not in controls_file.vendor_controls_files:
                raise ControlsFileError(
                    f"`controls.{name}` passes {vendor_path!r} but `vendor_controls_files` does "
                    "not record its hash"
                )
        out[name] = rendered
    for index, entry in enumerate(controls_file.matrix.entries if controls_file.matrix else []):
        for entry_catalog, entry_controls in entry.controls.items():
            try:
                catalog = installed_catalog(
                    entry_catalog, controls_file.kernel.arch, sorted(allowed)
                )
                rendered = render_controls(catalog, entry_controls)
            except (InvalidControl, CiqTuneError) as exc:
                raise ControlsFileError(
                    f"`matrix.entries[{index}].controls.{entry_catalog}` is not valid here: {exc}"
                ) from exc
            if entry.rendered.get(entry_catalog) != rendered:
                raise ControlsFileError(
                    f"`matrix.entries[{index}].rendered.{entry_catalog}` does not match what its "
                    f"`controls.{entry_catalog}` renders to ({rendered!r}); edited by hand or "
                    "tampered with"
                )
    return out


def check(
    controls_file: ControlsFile,
    *,
    source: str | Path | None = None,
    arch: str | None = None,
    gpu: GpuInfo | None = None,
    check_gpu: bool = True,
    vendor_controls_files: Sequence[str | Path] = (),
) -> list[str]:
    """Reasons why the controls file no longer matches the toolchain, GPU or kernel.

    Args:
        controls_file: a loaded controls file.
        source: the kernel source to compare with the recorded SHA-256 (None: not checked).
        arch: the target GPU name to compare with the recorded one (None: not checked).
        gpu: the GPU present (default: detected with nvidia-smi).
        check_gpu: False skips the GPU comparison (e.g. compile-only CI on a CPU).
        vendor_controls_files: vendor controls files the user allows (see `render`).

    Returns:
        An empty list when everything matches.
    """
    reasons: list[str] = []
    kernel = controls_file.kernel
    if source is not None:
        digest = sha256_file(source, replace(KERNEL_SOURCE, error=ControlsFileError))
        if digest != kernel.source_sha256:
            reasons.append(
                f"kernel source {str(source)!r} changed: sha256 {digest[:12]}… != recorded "
                f"{kernel.source_sha256[:12]}…"
            )
    if arch is not None and arch != kernel.arch:
        reasons.append(f"target arch {arch} != recorded {kernel.arch}")
    for name, recorded in controls_file.compilers.items():
        try:
            installed = installed_catalog(name, kernel.arch).describe()
        except CiqTuneError as exc:
            reasons.append(f"{name}: {exc}")
            continue
        if installed != recorded:
            reasons.append(f"{name} toolchain is {installed}, recorded {recorded}")
    try:
        render(controls_file, vendor_controls_files=vendor_controls_files)
    except ControlsFileError as exc:
        reasons.append(str(exc))
    if check_gpu and controls_file.gpu is not None:
        present = gpu if gpu is not None else detect_gpu()
        if present is None:
            reasons.append(f"recorded GPU {controls_file.gpu.model} but no GPU was found")
        elif present != controls_file.gpu:
            reasons.append(
                f"GPU is {present.model_dump()}, recorded {controls_file.gpu.model_dump()}"
            )
    return reasons
