"""`ciq_tune.tune_kernel` on a CPU (Triton's interpreter): a shipped kernel tuned from a script on
its example arguments, with no description file written by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.interpreted import run_interpreted

REPO = Path(__file__).resolve().parents[2]
KERNEL = REPO / "tests/objectives/data/rms_norm_shipped.py"

SCRIPT = """
import json, sys
import torch
import ciq_tune
from objectives.triton_entry import load_module
kernel = load_module(sys.argv[2]).rms_norm_heuristic
x, w = torch.randn(4, 40), torch.randn(40)
y = torch.empty_like(x)
tuned = ciq_tune.tune_kernel(
    kernel, y, y.stride(0), x, x.stride(0), w, 40, 1e-6, grid=(4,),
    params={"num_warps": {"ordinal": [1, 2, 4], "default": 4}}, budget=3, out=sys.argv[1],
    options={"num_cpus": 2, "tracking": "none", "validate_top": 0},
)
json.dump(tuned.config_for({"Y_ptr_dim0": 4, "Y_ptr_dim1": 40}), sys.stdout)
"""


@pytest.mark.ray
@pytest.mark.slow
def test_a_kernel_tunes_from_its_example_arguments(tmp_path: Path) -> None:
    config = run_interpreted(SCRIPT, str(tmp_path), str(KERNEL), timeout=600)
    assert config["params"]["num_warps"] in (1, 2, 4)
    # The description it wrote is a file the CLI tunes again.
    data = yaml.safe_load((tmp_path / "rms_norm_heuristic.yaml").read_text())
    assert data["params"] == {"num_warps": {"ordinal": [1, 2, 4], "default": 4}}
    assert data["reference"] == "shipped" and data["arguments"]["n_cols"] == "Y_ptr_dim1"
