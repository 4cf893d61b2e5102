"""Tests of `ciq_tune.runtime`: selection rules, nearest fallback, Triton configs, the launcher,
schema-1 files, and that it never imports Ray."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ciq_tune.controls import controls_file as cf
from ciq_tune.controls import detect_triton
from ciq_tune.controls.matrix import Matrix
from ciq_tune.controls.matrix import MatrixEntry
from ciq_tune.controls.matrix import SelectionRule
from ciq_tune.controls.matrix import ShapeResult
from ciq_tune.errors import ControlsFileError
from ciq_tune.runtime import TunedKernel
from ciq_tune.runtime import load

DATA = Path(__file__).parents[1] / "objectives/data"


def _entry(m: int, block: int, warps: int, **controls: object) -> MatrixEntry:
    return MatrixEntry(
        key={"M": m},
        params={"BLOCK": block},
        controls={"triton": {"num_warps": warps, **controls}},
        shapes=[ShapeResult(sizes={"M": m, "N": 64}, baseline=2.0, best=1.0)],
    )


def _write(tmp_path: Path, rule: SelectionRule, entries: list[MatrixEntry]) -> Path:
    triton = detect_triton("sm_90")
    record = cf.build(
        kernel=cf.KernelInfo(
            name="k", kind="triton", source="k.py", source_sha256="0" * 64, arch="sm_90"
        ),
        catalogs={"triton": triton},
        controls=entries[0].controls,
        params=entries[0].params,
        benchmark=cf.Benchmark(metric="time_ms", mode="min", sizes={"M": 1, "N": 64}),
        scores=cf.Scores(baseline=2.0, best=1.0),
        matrix=Matrix(selection=rule, metric="time_ms", entries=entries),
    )
    return cf.write(tmp_path / "k.controls.yaml", record)


def test_per_key_pow2_buckets_and_nearest_fallback_warns_once(tmp_path: Path) -> None:
    rule = SelectionRule(mode="per_key", key=["M"], bucket="pow2")
    path = _write(tmp_path, rule, [_entry(1, 16, 1), _entry(16, 32, 4), _entry(1024, 64, 8)])
    tuned = load(path)
    assert tuned.config_for({"M": 16, "N": 64})["params"] == {"BLOCK": 32}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 9..16 is the M=16 bucket: exact, no warning
        assert tuned.config_for({"M": 9, "N": 64})["params"] == {"BLOCK": 32}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tuned.config_for({"M": 512, "N": 64})["params"] == {"BLOCK": 64}
        tuned.config_for({"M": 300, "N": 64})  # the same missing bucket (512): no new warning
    assert len(caught) == 1 and "nearest" in str(caught[0].message)
    assert tuned.untuned([{"M": 16, "N": 64}, {"M": 9, "N": 64}]) == [{"M": 9, "N": 64}]
    with pytest.raises(ControlsFileError, match="lack"):
        tuned.config_for({"N": 64})


def test_triton_configs_carry_options_and_ptx_options(tmp_path: Path) -> None:
    import triton

    rule = SelectionRule(mode="per_key", key=["M"])
    entries = [_entry(1, 16, 2, maxnreg=128), _entry(16, 32, 8)]
    tuned = load(_write(tmp_path, rule, entries))
    configs = tuned.triton_configs()
    assert all(isinstance(c, triton.Config) for c in configs)
    assert configs[0].kwargs == {"BLOCK": 16}
    assert (configs[0].num_warps, configs[0].maxnreg) == (2, 128)
    assert (configs[1].num_warps, configs[1].maxnreg, configs[1].num_stages) == (8, None, 3)


def test_tampered_entry_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, SelectionRule(mode="per_key", key=["M"]), [_entry(1, 16, 2)])
    path.write_text(path.read_text().replace("num_warps: 2\n", "num_warps: 16\n", 1))
    text = path.read_text()
    assert "num_warps: 16" in text
    with pytest.raises(ControlsFileError, match="tampered"):
        load(path)


def test_schema_1_file_loads_as_one_entry(tmp_path: Path) -> None:
    path = _write(tmp_path, SelectionRule(mode="one"), [_entry(1, 16, 2)])
    lines = [line for line in path.read_text().splitlines()]
    cut = lines.index("matrix:")
    path.write_text("\n".join(lines[:cut]).replace("schema_version: 2", "schema_version: 1"))
    tuned = load(path)
    assert tuned.controls_file.schema_version == 1
    assert tuned.config_for({"M": 999}) == {
        "params": {"BLOCK": 16},
        "controls": {"triton": {"num_warps": 2}},
    }


def test_launcher_picks_the_config_of_each_launch(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch

    from objectives.triton_entry import load_module

    kernel = load_module(str(DATA / "row_scale.py")).row_scale_kernel
    rule = SelectionRule(mode="per_key", key=["n_cols"])
    entries = [
        MatrixEntry(
            key={"n_cols": n},
            params={"BLOCK": block},
            controls={"triton": {"num_warps": 1}},
            shapes=[ShapeResult(sizes={"rows": 2, "n_cols": n})],
        )
        for n, block in ((16, 16), (64, 32))
    ]
    tuned = load(_write(tmp_path, rule, entries))
    seen = []

    def grid(meta: dict) -> tuple[int]:
        seen.append(meta["BLOCK"])
        return (meta["rows"],)

    launch = tuned.launcher(kernel, grid=grid)
    for n in (16, 64):
        x = torch.randn(2, n)
        y = torch.full_like(x, float("nan"))
        launch(x, y, n_cols=n, sizes={"rows": 2})
        torch.testing.assert_close(y, 2 * x)
    assert seen == [16, 32]


def test_runtime_does_not_import_ray() -> None:
    code = "import sys, ciq_tune.runtime; assert 'ray' not in sys.modules, 'ray imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_helion_configs_come_from_the_entries(tmp_path: Path) -> None:
    import helion

    entry = MatrixEntry(
        key={"M": 16},
        params={"block_sizes_0": 16},
        helion_config={"block_sizes": [16, 32], "num_warps": 4},
        shapes=[ShapeResult(sizes={"M": 16, "N": 64})],
    )
    record = cf.build(
        kernel=cf.KernelInfo(
            name="k", kind="helion", source="k.py", source_sha256="0" * 64, arch="sm_90"
        ),
        catalogs={},
        controls={},
        benchmark=cf.Benchmark(metric="time_ms", mode="min", sizes={"M": 16, "N": 64}),
        scores=cf.Scores(baseline=2.0, best=1.0),
        matrix=Matrix(
            selection=SelectionRule(mode="per_key", key=["M"]), metric="time_ms", entries=[entry]
        ),
    )
    tuned = load(cf.write(tmp_path / "h.controls.yaml", record))
    config = tuned.helion_config_for({"M": 16, "N": 64})
    assert isinstance(config, helion.Config)
    assert config.config["block_sizes"] == [16, 32]
    assert tuned.helion_configs() == [config]
    no_helion = TunedKernel(tuned.controls_file.model_copy(update={"matrix": None}))
    with pytest.raises(ControlsFileError, match="helion_config"):
        no_helion.helion_config_for({"M": 16})
