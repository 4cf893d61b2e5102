"""Every kernel description shipped in examples/ loads and builds its search space (a typo in
one would otherwise surface only on a GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from objectives import load_description
from objectives import make_search_space

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples/kernels").glob("*/*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLES])
def test_an_example_description_loads_and_builds_its_space(path: Path) -> None:
    desc = load_description(path)
    for at in [desc.at_shape(shape) for shape in desc.matrix()] if desc.shapes else [desc]:
        space = make_search_space(at)
        assert space.is_feasible(space.default_genes())
