#!/usr/bin/env bash
# Create .venv and install ciq-tune with the given extras (default: report).
# Only when an extra needs torch (gpu, helion) is torch's CPU build installed first, so that
# nothing pulls the CUDA wheels; the PTX demo installs no torch.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-report}
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# pip byte-compiles what it installs: keep it. With PYTHONDONTWRITEBYTECODE=1 (set on these
# machines) nothing else ever writes a .pyc, and every process (each Ray worker, each isolated
# worker) would compile torch, ray and mlflow again: 24 s of CPU per import, 9 s compiled.
if [[ ,$extras, == *,gpu,* || ,$extras, == *,helion,* ]]; then
  .venv/bin/python -m pip install -q "torch==2.13.0"
fi
.venv/bin/python -m pip install -q -e ".[${extras}]"
