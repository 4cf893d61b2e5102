"""A description's `grid`/`block` expressions are evaluated within the safe evaluator's bounds."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ciq_tune.errors import DescriptionError
from objectives.description import load_description

BASE = "kind: ptx\nsource: kernel.ptx\nsizes: {N: 100}\nparams: {BLOCK: {choice: [1, 2]}}\n"


def _load(tmp_path: Path, extra: str) -> object:
    (tmp_path / "kernel.ptx").write_text("// ptx\n")
    path = tmp_path / "k.yaml"
    path.write_text(BASE + extra)
    return load_description(path)


def test_a_grid_past_a_bound_with_its_sizes_is_one_error_at_launch(tmp_path: Path) -> None:
    desc = _load(tmp_path, "grid: '(BLOCK << N,)'\n")
    start = time.process_time()
    with pytest.raises(DescriptionError) as info:
        desc.launch({"BLOCK": 2})  # type: ignore[attr-defined]
    assert time.process_time() - start < 1.0
    message = str(info.value)
    assert message.startswith("`grid` expression '(BLOCK << N,)' shifts by 100 on "), message
    assert message.endswith("a shift amount of `<<` or `>>` is at most 64"), message
    assert "\n" not in message


def test_a_block_past_a_bound_without_names_is_refused_when_loaded(tmp_path: Path) -> None:
    with pytest.raises(DescriptionError, match=r"`block`: expression .* raises to the power"):
        _load(tmp_path, "block: '(BLOCK * 2 ** 1000,)'\n")


def test_ordinary_launch_expressions_still_evaluate(tmp_path: Path) -> None:
    desc = _load(tmp_path, "grid: '(ceil(N / BLOCK), 1 << 4, 2 ** 10)'\n")
    assert desc.launch({"BLOCK": 2}) == {"grid": (50, 16, 1024)}  # type: ignore[attr-defined]


def test_a_constraint_on_an_unknown_name_is_refused_with_the_file_and_field(
    tmp_path: Path,
) -> None:
    from objectives import make_search_space
    from tests.objectives.test_triton_entry import shipped_description

    path = shipped_description(tmp_path, constraints=["nwarps <= 4"])
    with pytest.raises(DescriptionError) as info:
        make_search_space(load_description(path))
    message = str(info.value)
    assert message.startswith(f"{path.resolve()}: field `constraints`: ")
    assert "'nwarps <= 4' names ['nwarps']" in message and "\n" not in message
