"""`bench.small_space`'s peers on a CPU (Triton's interpreter): the same listed configurations,
each method's choice per shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.small_space import listed_configs
from bench.small_space import run_autotune
from bench.small_space import run_loop
from objectives import load_description
from tests.objectives.data.row_scale_description import row_scale_description


def test_autotune_and_the_loop_choose_among_the_listed_configurations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    shapes = [{"rows": 1, "n_cols": 16}, {"rows": 2, "n_cols": 64}]
    desc = load_description(row_scale_description(tmp_path, shapes=shapes))
    configs = listed_configs(desc)
    blocks = {c["params"]["BLOCK"] for c in configs}
    assert blocks == {16, 32, 64} and len(configs) == len({str(c) for c in configs})
    loop = run_loop(desc, configs, tmp_path, "cpu")
    assert len(loop["choices"]) == 2 and all(c in configs for c in loop["choices"])
    auto = run_autotune(desc, configs, tmp_path, "cpu")
    assert len(auto["choices"]) == 2
    assert all(c["BLOCK"] in blocks for c in auto["choices"])
    assert loop["wall_s"] > 0 and auto["wall_s"] > 0
