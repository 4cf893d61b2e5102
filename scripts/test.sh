#!/usr/bin/env bash
# Install ciq-tune with its test dependencies into .venv from scratch, then run the tests.
# torch's CPU build is installed first so that nothing pulls the CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[dev,gpu,mlflow]"
.venv/bin/python -m pytest -q "$@"
