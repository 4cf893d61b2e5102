#!/usr/bin/env bash
# One device run (H100): environment, GPU-marked tests, Triton matmul and CUDA row-sum searches
# and their interleaved re-measurement (bench/trust.py). Run from the repo root
# with .whl carried (see ../shared/tools/gpu-wheels.sh); results go to $OUT.
#   bash scripts/gpu/run_h100.sh MATMUL_EVALS CUDA_EVALS [steps: env,tests,matmul,cuda]
set -uo pipefail
MM_EVALS=${1:-50}
CU_EVALS=${2:-40}
STEPS=${3:-env,tests,matmul,cuda}
export PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled PYTHONPATH=$PWD:/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
if [[ $STEPS == *env* ]]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  python3 -c 'import torch, triton, cupy, ray, pydantic, pymoo; print("torch", torch.__version__,
"triton", triton.__version__, "cupy", cupy.__version__, "ray", ray.__version__,
"cuda", torch.version.cuda, torch.cuda.get_device_name())'
  nvcc --version | tail -1
fi
if [[ $STEPS == *tests* ]]; then
  timeout 120 python3 -m pytest -q -m gpu tests/objectives -p no:cacheprovider -rA 2>&1 \
    | tee "$OUT/gpu_tests.log" | tail -25
fi
if [[ $STEPS == *matmul* ]]; then
  timeout 290 python3 -m bench.trust --kernels matmul --budget "$MM_EVALS" --out "$OUT" 2>&1 \
    | grep -v -E "WARNING|INFO|^\s*$" | tee "$OUT/matmul.log" | tail -20
fi
if [[ $STEPS == *cuda* ]]; then
  timeout 170 python3 -m bench.trust --kernels row_sum --budget "$CU_EVALS" --out "$OUT" 2>&1 \
    | grep -v -E "WARNING|INFO|^\s*$" | tee "$OUT/row_sum.log" | tail -20
fi
