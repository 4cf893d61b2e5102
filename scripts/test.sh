#!/usr/bin/env bash
# Install ciq-tune with its test dependencies into .venv from scratch, then run the tests.
# GPU tests are marked `gpu` and skip without a GPU; extra pytest arguments are passed on.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev,gpu,helion,mlflow,report
.venv/bin/python -m pytest -q "$@"
