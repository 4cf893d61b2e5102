"""`ciq_tune.strict_io`: what is accepted (so the refusals in test_hostile_files mean something)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from ciq_tune.errors import InputFileError
from ciq_tune.strict_io import KERNEL_SOURCE
from ciq_tune.strict_io import MAX_DEPTH
from ciq_tune.strict_io import load_data
from ciq_tune.strict_io import parse_json
from ciq_tune.strict_io import parse_yaml
from ciq_tune.strict_io import sha256_file


def test_ordinary_yaml_and_json_load(tmp_path: Path) -> None:
    text = "a: [1, {b: 2}]\nc: &anchor 3\nd: 'x'\n"  # an anchor alone is harmless
    (tmp_path / "f.yaml").write_text(text)
    assert load_data(tmp_path / "f.yaml") == {"a": [1, {"b": 2}], "c": 3, "d": "x"}
    (tmp_path / "f.json").write_text('{"a": [1, 2.5, "s", null, true]}')
    assert load_data(tmp_path / "f.json") == {"a": [1, 2.5, "s", None, True]}


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "real.yaml").write_text("a: 1\n")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "real.yaml")
    assert load_data(tmp_path / "link.yaml") == {"a": 1}


def test_nesting_up_to_the_limit_is_accepted() -> None:
    depth = MAX_DEPTH - 1
    assert parse_json("[" * depth + "]" * depth) is not None
    assert parse_yaml("[" * depth + "]" * depth) is not None
    with pytest.raises(InputFileError, match="nested"):
        parse_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    # Brackets inside strings are text, not nesting.
    assert parse_json('{"s": "' + "[" * 500 + '"}') == {"s": "[" * 500}


def test_the_same_key_in_different_mappings_is_fine() -> None:
    assert parse_yaml("a: {x: 1}\nb: {x: 2}\n") == {"a": {"x": 1}, "b": {"x": 2}}


def test_hashing_matches_hashlib_and_stops_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "k.ptx"
    path.write_bytes(b"x" * 3_000_000)
    assert sha256_file(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(InputFileError, match="too large"):
        sha256_file(path, replace(KERNEL_SOURCE, max_bytes=1_000_000))
