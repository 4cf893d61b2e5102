#!/usr/bin/env bash
# Create .venv and install ciq-tune with the given extras (default: report).
# Only when an extra needs torch (gpu, helion) is torch's CPU build installed first, so that
# nothing pulls the CUDA wheels; the PTX demo installs no torch.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-report}
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# --no-compile: no bytecode for the ~19,000 modules of the dependencies up front (~27 s of CPU
# with every extra); Python compiles the ones a run imports, once, when it first imports them.
if [[ ,$extras, == *,gpu,* || ,$extras, == *,helion,* ]]; then
  .venv/bin/python -m pip install -q --no-compile "torch==2.13.0"
fi
.venv/bin/python -m pip install -q --no-compile -e ".[${extras}]"
