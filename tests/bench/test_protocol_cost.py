"""`bench.protocol_cost` on a CPU (Triton's interpreter): every variant times every shape in
each round and gets its row."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.protocol_cost import main
from bench.protocol_cost import variant
from tests.objectives.data.row_scale_description import row_scale_description


def test_each_variant_times_the_matrix_and_prints_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    shapes = [{"rows": 2, "n_cols": 16}, {"rows": 4, "n_cols": 64, "weight": 3}]
    path = row_scale_description(tmp_path, shapes=shapes)
    assert main([str(path), "--rounds", "3", "--variant", "40:10", "--variant", "20:2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[1:]] == ["| 40:10", "| 20:2"]
    assert rows[1].endswith("| 1.0000 |")  # the reference against itself
    assert variant("20:2").rep_ms == 20 and variant("20:2").busy_warmup_ms == 2
