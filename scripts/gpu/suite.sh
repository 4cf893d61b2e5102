#!/usr/bin/env bash
# The GPU kernel suite in parts, each well inside a 10-minute device call. From the repo root,
# with .whl carried (bash ../shared/tools/gpu-wheels.sh); results go to $OUT (default
# ./suite-out): per kernel KERNEL.json and KERNEL.md (table fragment), and suite.log (all parts).
#   bash scripts/gpu/suite.sh PARTS        PARTS: comma-separated, in order, from
#     env         nvidia-smi, versions, GPU-marked objective tests              (~1 min)
#     matmul      persistent TMA matmul 4096³, 100 evaluations                 (~3-4 min)
#     softmax     softmax 4096×8192, 50 evaluations                            (~2 min)
#     layer_norm  layer norm 4096×8192, 40 evaluations                         (~2 min)
#     attention   flash-attention forward b4 h32 s4096 d64, 60 evaluations     (~3 min)
#     row_sum     CUDA C++ row sum 16384×4096, 40 evaluations                  (~2 min)
#     matmul_tiled  the earlier tiled matmul 4096³, 100 evaluations (optional)  (~3 min)
#   e.g. three calls: env,matmul  then  softmax,layer_norm  then  attention,row_sum
# Environment: EVALS_<PART> overrides a part's evaluations, TRIALS_PER_GPU (default 6) the
# trials sharing the GPU, ROUNDS the re-measurement rounds (default 50). DRY_RUN=1 runs the
# parts on a CPU instead (Triton's interpreter at tiny sizes, 3 evaluations; no wheels).
set -uo pipefail
PARTS=${1:?usage: bash scripts/gpu/suite.sh env,matmul,softmax,layer_norm,attention,row_sum}
OUT=${OUT:-$PWD/suite-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled PYTHONPATH=$PWD:/tmp/site
DRY=()
if [[ ${DRY_RUN:-0} == 1 ]]; then
  DRY=(--dry-run --num-cpus 2 --work-dir /tmp/ciq-suite-dry)
elif [[ -d .whl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { echo "suite.sh: wheel install failed" >&2; exit 1; }
fi
declare -A EVALS=([matmul]=100 [softmax]=50 [layer_norm]=40 [attention]=60 [row_sum]=40
                  [matmul_tiled]=100)
status=0
IFS=, read -ra parts <<< "$PARTS"
for part in "${parts[@]}"; do
  start=$SECONDS
  echo "=== suite part $part ($(date +%H:%M:%S))"
  if [[ $part == env ]]; then
    {
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
        --format=csv
      python3 -c 'import torch, triton, ray, pydantic, pymoo; print("torch", torch.__version__,
"triton", triton.__version__, "ray", ray.__version__, "cuda", torch.version.cuda,
torch.cuda.get_device_name())'
      timeout 300 python3 -m pytest -q -m gpu tests/objectives -p no:cacheprovider -rfEs
    } 2>&1 | tee -a "$OUT/suite.log" | tail -30
    code=${PIPESTATUS[0]}
  elif [[ -n ${EVALS[$part]:-} ]]; then
    var=EVALS_${part^^}
    # 570 s: the part ends (with its JSON written after every step) inside a 10-minute call.
    evals=${!var:-${EVALS[$part]}}
    [[ ${DRY_RUN:-0} == 1 ]] && evals=${!var:-3} && ROUNDS=${ROUNDS:-5}
    timeout 570 python3 scripts/gpu/suite.py --kernel "$part" --evals "$evals" "${DRY[@]}" \
      --trials-per-gpu "${TRIALS_PER_GPU:-6}" --rounds "${ROUNDS:-50}" --out "$OUT" 2>&1 \
      | grep --line-buffered -v -E "^\s*$|INFO|WARNING|╭|╰|│|├|tensorboard|View detailed" \
      | tee -a "$OUT/suite.log"
    code=${PIPESTATUS[0]}
  else
    echo "suite.sh: unknown part '$part'" >&2
    code=2
  fi
  echo "=== suite part $part: exit $code after $((SECONDS - start)) s"
  [[ $code == 0 ]] || status=1
done
exit $status
