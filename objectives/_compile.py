"""Running compilers: argument lists with a timeout, `ptxas -v` statistics, SASS instruction
counts, and a compile cache keyed by source hash, controls and compiler version."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import asdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ciq_tune.errors import BenchmarkTimeout
from ciq_tune.errors import CompileError

# Seconds to wait for a disassembler; it only reads one small binary.
_DISASSEMBLE_TIMEOUT_S = 60
# Volta (sm_70) and later encode every SASS instruction in 16 bytes; a cubin's code sections
# hold nothing else (the disassembler lists their padding NOPs too). EM_CUDA: ELF machine.
_SASS_INSTRUCTION_BYTES = 16
_EM_CUDA = 190
_FUNCTION = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", re.I
)
_USED = re.compile(r"Used (\d+) registers")
# One SASS instruction line of `cuobjdump -sass` / `nvdisasm`: "/*0070*/  IMAD.MOV.U32 …".
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+[^\s;]", re.M)


@dataclass(frozen=True)
class CompilerRun:
    """The outcome of one compiler invocation."""

    argv: tuple[str, ...]
    returncode: int
    log: str
    elapsed_s: float


def run_compiler(
    argv: Sequence[str], *, timeout_s: float, cwd: str | Path | None = None
) -> CompilerRun:
    """Run a compiler as an argument list (never a shell) and capture its output.

    The compiler runs in its own process group, which is killed as a whole on timeout so that
    no helper process it started survives.

    Args:
        argv: the program and its arguments.
        timeout_s: wall-clock limit in seconds.
        cwd: working directory.

    Raises:
        BenchmarkTimeout: the compiler ran longer than `timeout_s`.
        CompileError: the program cannot be started.
    """
    if isinstance(argv, str):
        raise TypeError(f"`argv` must be a list of arguments, not a string: argv={argv!r}")
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        raise CompileError(f"cannot start {argv[0]!r}: {exc}") from exc
    try:
        log, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise BenchmarkTimeout(
            f"{Path(argv[0]).name} ran past timeout_s={timeout_s} s and was killed"
        ) from exc
    return CompilerRun(tuple(argv), proc.returncode, log, time.perf_counter() - start)


@dataclass(frozen=True)
class KernelStats:
    """Per-function code-generation statistics from `ptxas -v` (bytes and counts)."""

    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0

    @property
    def spill_bytes(self) -> int:
        """Bytes spilled per thread: stores plus loads."""
        return self.spill_stores + self.spill_loads

    def to_dict(self) -> dict[str, int]:
        return {**asdict(self), "spill_bytes": self.spill_bytes}


def parse_ptxas_verbose(log: str) -> dict[str, KernelStats]:
    """Statistics per function from a ``ptxas -v`` log (also inside nvcc's ``-Xptxas -v``)."""
    found: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in log.splitlines():
        function = _FUNCTION.search(line)
        if function:
            current = function.group(1)
            found.setdefault(current, {})
        if current is None:
            continue
        frame = _FRAME.search(line)
        if frame:
            stack, stores, loads = (int(g) for g in frame.groups())
            found[current].update(stack_bytes=stack, spill_stores=stores, spill_loads=loads)
        used = _USED.search(line)
        if used:
            found[current]["registers"] = int(used.group(1))
    return {name: KernelStats(**values) for name, values in found.items()}


def find_disassembler() -> list[str] | None:
    """The command prefix that prints SASS of a cubin: ``cuobjdump -sass`` or ``nvdisasm``,
    from PATH or else the copies bundled with Triton; None when there is none."""
    folders: list[Path] = []
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.submodule_search_locations:
        folders.append(Path(next(iter(spec.submodule_search_locations))) / "backends/nvidia/bin")
    for tool, args in (("cuobjdump", ["-sass"]), ("nvdisasm", [])):
        found = shutil.which(tool)
        for folder in folders:
            if found is None and (folder / tool).is_file():
                found = str(folder / tool)
        if found is not None:
            return [found, *args]
    return None


def count_sass_instructions(cubin: str | Path, *, arch: str | None = None) -> int | None:
    """Number of SASS instructions in a cubin, or None without a disassembler that reads it.

    For `arch` sm_70 and later it is read from the cubin's section table (`sass_bytes`), the
    disassembler's count without running it (~0.4 s of CPU per candidate, more than ptxas takes
    on a small kernel).
    """
    number = re.match(r"sm_(\d+)", arch or "")
    if number is not None and int(number.group(1)) >= 70:
        size = sass_bytes(Path(cubin).read_bytes())
        if size is not None and size % _SASS_INSTRUCTION_BYTES == 0:
            return size // _SASS_INSTRUCTION_BYTES
    command = find_disassembler()
    if command is None:
        return None
    try:
        run = run_compiler([*command, str(cubin)], timeout_s=_DISASSEMBLE_TIMEOUT_S)
    except (BenchmarkTimeout, CompileError):
        return None
    if run.returncode != 0:
        return None
    return len(_SASS_LINE.findall(run.log))


def sass_bytes(cubin: bytes) -> int | None:
    """Total size in bytes of the code (``.text.<function>`` sections) of a cubin, or None when
    `cubin` is not a 64-bit little-endian CUDA ELF file."""
    if cubin[:6] != b"\x7fELF\x02\x01" or struct.unpack_from("<H", cubin, 18)[0] != _EM_CUDA:
        return None
    (section_table,) = struct.unpack_from("<Q", cubin, 40)
    entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 58)
    # Elf64_Shdr: name, type, flags, addr, offset, size, link, info, addralign, entsize.
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", cubin, section_table + i * entry_size)
        for i in range(count)
    ]
    names_at = sections[names_index][4]

    def name(section: tuple[int, ...]) -> bytes:
        start = names_at + section[0]
        return cubin[start : cubin.index(b"\0", start)]

    return sum(s[5] for s in sections if name(s).startswith(b".text."))


def cache_key(source_sha256: str, argv: Sequence[str], compiler: Mapping[str, Any]) -> str:
    """Identity of a compile: source hash, rendered controls (argv) and compiler version."""
    text = json.dumps(
        {"source": source_sha256, "argv": list(argv), "compiler": dict(compiler)},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def default_cache_dir() -> Path:
    """``$CIQ_TUNE_CACHE`` or ``~/.cache/ciq-tune/compile``."""
    env = os.environ.get("CIQ_TUNE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "ciq-tune" / "compile"


class CompileCache:
    """Compile results on disk, one JSON record per `cache_key`, written atomically so that
    concurrent trials on one machine never read half a record."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()

    def _path(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", key):
            raise ValueError(f"`key` must be a cache_key() digest, got key={key!r}")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record, or None when absent or unreadable."""
        try:
            data = json.loads(self._path(key).read_text())
        except (OSError, json.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Store a JSON-safe record under `key` (temp file + rename)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(dict(record), handle, sort_keys=True)
        os.replace(tmp, path)
