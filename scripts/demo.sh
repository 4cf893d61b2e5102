#!/usr/bin/env bash
# The main job end to end on the embedded default: install, then tune the register-bound PTX
# example over ptxas controls with Ray Tune (local, in-process) + CompileIQSearcher, tracking
# every trial in MLflow (sqlite file runs/demo/mlflow.db), and build the report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh report
out=${1:-runs/demo}
.venv/bin/ciq-tune tune examples/kernels/ptx/spill.yaml --budget 40 --num-cpus 2 --runtime ray --out "$out"
.venv/bin/ciq-tune report "$out"
.venv/bin/ciq-tune check "$out/spill.controls.yaml" --description examples/kernels/ptx/spill.yaml
echo "MLflow: .venv/bin/mlflow ui --backend-store-uri sqlite:///$out/mlflow.db (127.0.0.1:5000)"
