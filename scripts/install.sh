#!/usr/bin/env bash
# Create .venv and install ciq-tune with the given extras (default: mlflow,report).
# torch's CPU build is installed first so that nothing pulls the CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-mlflow,report}
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[${extras}]"
