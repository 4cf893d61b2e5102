"""Strict reading of the files a user hands to ciq-tune (YAML, JSON, kernel sources).

Every YAML or JSON file ciq-tune reads goes through `load_data` (or `load_yaml`/`load_json`), and
every kernel source it hashes through `sha256_file`. A file is read only when it is a regular
file under a size limit (never a FIFO, a device or a symlink to one), decoded as UTF-8 with an
error that says so, and parsed with duplicate keys as errors, YAML aliases refused (a few
kilobytes of nested aliases expand to gigabytes) and nesting bounded. Loading never runs code:
YAML is read with the safe loader's tags only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import BinaryIO

import numpy as np
import yaml
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode
from yaml.nodes import Node

from ciq_tune.errors import CiqTuneError
from ciq_tune.errors import InputFileError

# Description, controls, settings and saved-space files are kilobytes; 1 MB is generous (bytes).
MAX_DATA_BYTES = 1_000_000
# Kernel sources hashed for provenance (PTX of a large kernel is a few MB) (bytes).
MAX_SOURCE_BYTES = 64 * 1024 * 1024
# Deepest nesting of mappings and lists accepted in a data file (real files use < 10).
MAX_DEPTH = 64
# Bytes read at a time when hashing.
_CHUNK = 1 << 20
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
# Quoted scalars and comments of YAML, whose brackets are text, not nesting.
_YAML_QUOTED_OR_COMMENT = re.compile(
    r'"(?:[^"\\]|\\.)*"|\'(?:[^\']|\'\')*\'|(?:^|(?<=\s))#[^\n]*', re.DOTALL
)


@dataclass(frozen=True)
class FileKind:
    """What a file is to ciq-tune: how messages name it, how large it may be and which error
    refuses it.

    Attributes:
        what: what the file is, for messages ("kernel description").
        max_bytes: the largest size accepted, in bytes.
        error: the exception class raised (a `CiqTuneError`).
    """

    what: str = "file"
    max_bytes: int = MAX_DATA_BYTES
    error: type[CiqTuneError] = InputFileError

    def refused(self, path: str | Path, problem: str) -> CiqTuneError:
        """The error refusing the file at `path`: "<what> '<path>' <problem>"."""
        return self.error(f"{self.what} {str(path)!r} {problem}")


KERNEL_SOURCE = FileKind("kernel source", MAX_SOURCE_BYTES)
"""A kernel source hashed for provenance (PTX, CUDA C++, Python)."""


@contextmanager
def _regular_file(path: Path, kind: FileKind) -> Iterator[tuple[BinaryIO, int]]:
    """`path` open for reading, and its size; refused unless it is a regular file."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise kind.error(f"cannot read {kind.what} {str(path)!r}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise kind.refused(
                path, f"is not a regular file ({_file_type(info.st_mode)}); give the path of a file"
            )
        yield f, info.st_size


def read_bytes(path: str | Path, kind: FileKind = FileKind()) -> bytes:
    """The bytes of a regular file of at most `kind.max_bytes` bytes.

    Args:
        path: the file (a symlink is followed; its target must be a regular file).
        kind: what the file is, its size limit and the error that refuses it.

    Raises:
        kind.error: missing, unreadable, not a regular file (FIFO, device, directory) or too
            large.
    """
    with _regular_file(Path(path), kind) as (f, size):
        if size > kind.max_bytes:
            raise kind.refused(
                path, f"is too large: {size} bytes, more than the {kind.max_bytes} bytes allowed"
            )
        data = f.read(kind.max_bytes + 1)
    if len(data) > kind.max_bytes:  # it grew while being read
        raise kind.refused(path, f"is too large: over {kind.max_bytes} bytes")
    return data


def read_text(path: str | Path, kind: FileKind = FileKind()) -> str:
    """The text of a regular UTF-8 file of at most `kind.max_bytes` bytes (see `read_bytes`)."""
    data = read_bytes(path, kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        hint = " (it looks like UTF-16)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise kind.refused(
            path,
            f"is not UTF-8 text{hint}: byte 0x{data[exc.start]:02x} at offset {exc.start}; "
            "save it as UTF-8",
        ) from None


def sha256_file(path: str | Path, kind: FileKind = KERNEL_SOURCE) -> str:
    """Hex SHA-256 of a regular file of at most `kind.max_bytes` bytes, read in chunks."""
    digest = hashlib.sha256()
    with _regular_file(Path(path), kind) as (f, _):
        total = 0
        while chunk := f.read(_CHUNK):
            total += len(chunk)
            if total > kind.max_bytes:
                raise kind.refused(path, f"is too large: over {kind.max_bytes} bytes")
            digest.update(chunk)
    return digest.hexdigest()


def parse_yaml(
    text: str, *, source: str = "YAML text", error: type[CiqTuneError] = InputFileError
) -> Any:
    """Parse YAML text strictly (see `load_yaml`); `source` names it in messages."""
    return _parse(text, _YAML, source, error)


def parse_json(
    text: str, *, source: str = "JSON text", error: type[CiqTuneError] = InputFileError
) -> Any:
    """Parse JSON text strictly (see `load_json`); `source` names it in messages."""
    return _parse(text, _JSON, source, error)


def load_data(
    path: str | Path, kind: FileKind = FileKind(), parse: Callable[..., Any] | None = None
) -> Any:
    """Parse a file strictly with `parse` (`parse_yaml` or `parse_json`); without it, as JSON
    for a ``.json`` file and as YAML for anything else."""
    if parse is None:
        parse = parse_json if Path(path).suffix.lower() == ".json" else parse_yaml
    text = read_text(path, kind)
    return parse(text, source=f"{kind.what} {str(path)!r}", error=kind.error)


def load_yaml(path: str | Path, kind: FileKind = FileKind("YAML file")) -> Any:
    """Parse a YAML file strictly: duplicate keys, aliases and deep nesting are errors."""
    return load_data(path, kind, parse_yaml)


def load_json(path: str | Path, kind: FileKind = FileKind("JSON file")) -> Any:
    """Parse a JSON file strictly: duplicate keys, NaN/Infinity and deep nesting are errors."""
    return load_data(path, kind, parse_json)


@dataclass(frozen=True)
class _Format:
    """How the strict parsers read one data format.

    Attributes:
        name: the format's name in messages ("not valid YAML").
        literals: the quoted scalars (and comments) whose brackets are text, not nesting.
        load: parses text, raising `_Refused` for what the strict loaders do not accept.
        invalid: the parser's error for text that is not in the format.
    """

    name: str
    literals: re.Pattern[str]
    load: Callable[[str], Any]
    invalid: type[Exception]


def _parse(text: str, fmt: _Format, source: str, error: type[CiqTuneError]) -> Any:
    # Nesting is measured before parsing: PyYAML's scanner reads a whole run of opening brackets
    # before it yields a token (each may start a key), so refusing deep flow nesting only while
    # composing would come too late.
    depth = _bracket_depth(fmt.literals.sub("", text))
    if depth > MAX_DEPTH:
        raise error(f"{source}: nested {depth} levels deep; at most {MAX_DEPTH} are allowed")
    try:
        return fmt.load(text)
    except _Refused as exc:
        raise error(f"{source}: {exc}") from None
    except fmt.invalid as exc:
        raise error(f"{source}: not valid {fmt.name}: {_one_line(exc)}") from None


def _load_yaml_text(text: str) -> Any:
    loader = _StrictLoader(text)  # its reader refuses control characters right away
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _load_json_text(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant)


_YAML = _Format("YAML", _YAML_QUOTED_OR_COMMENT, _load_yaml_text, yaml.YAMLError)
_JSON = _Format("JSON", _JSON_STRING, _load_json_text, json.JSONDecodeError)


class _Refused(ValueError):
    """A construct the strict loaders do not accept (duplicate key, alias, deep nesting)."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader with duplicate keys, aliases and deep nesting refused."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            raise _Refused(
                f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not "
                "allowed; write the value out"
            )
        self._depth += 1
        if self._depth > MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise _Refused(
                f"line {mark.line + 1}: nested more than {MAX_DEPTH} levels deep; at most "
                f"{MAX_DEPTH} are allowed"
            )
        try:
            node: Node | None = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _Refused(
                    f"line {key_node.start_mark.line + 1}: YAML merge keys (<<) are not allowed"
                )
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise ConstructorError(
                    None, None, "found an unhashable key", key_node.start_mark
                ) from None
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _Refused(
                    f"line {line}: duplicate key {key!r} (first at line {seen[key]}); a file "
                    "must say each thing once"
                )
            seen[key] = line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key!r}; a file must say each thing once")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON value; write a number or a string")


def _bracket_depth(text: str) -> int:
    """Deepest nesting of brackets in `text` (vectorised: a 1 MB file of them takes ms)."""
    only = _NOT_BRACKET.sub("", text).encode("ascii")
    if not only:
        return 0
    codes = np.frombuffer(only, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


__all__ = [
    "MAX_DATA_BYTES",
    "MAX_DEPTH",
    "MAX_SOURCE_BYTES",
    "load_data",
    "load_json",
    "load_yaml",
    "parse_json",
    "parse_yaml",
    "read_bytes",
    "read_text",
    "sha256_file",
]
