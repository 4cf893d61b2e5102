"""Apply tuned configurations at launch: read a controls file and pick the configuration of a
launch's sizes, as Triton configs, a launcher, Helion Configs or compiler arguments.

This module is what deployed code imports: it needs the controls file and, for the objects it
builds, Triton or Helion; never Ray. See docs/deploying.md.

    tuned = ciq_tune.runtime.load("matmul.controls.yaml")
    tuned.config_for({"M": 16, "N": 4096, "K": 4096})  # {"params": {...}, "controls": {...}}
    @triton.autotune(configs=tuned.triton_configs(), key=["M", "N", "K"])

    @ciq_tune.runtime.tuned("kernel.controls.yaml")  # on the kernel as it ships
    @triton.jit
    def kernel(...): ...
"""

from __future__ import annotations

from ciq_tune.runtime.decorator import TunedLaunch
from ciq_tune.runtime.decorator import tuned
from ciq_tune.runtime.tuned_file import Launcher
from ciq_tune.runtime.tuned_file import TunedKernel
from ciq_tune.runtime.tuned_file import load

__all__ = ["Launcher", "TunedKernel", "TunedLaunch", "load", "tuned"]
