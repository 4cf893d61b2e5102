#!/usr/bin/env bash
# The whole-run figures of docs/benchmarks.md ("The matrix as the unit of work") on one GPU:
# each step is one of the bench scripts below, from a cold Triton cache, its table printed as it
# ends and kept in OUT/STEP.log; OUT/logs.tar.gz holds every run's JSON and log. Run from the repository root on a GPU machine:
#     bash bench/unit_of_work.sh OUT [STEP ...]
# Steps (default: matmul small1 small6 matrix):
#   matmul   python3 -m bench.cli_run: the persistent matmul 4096³, 100 evaluations, validated
#   small1   python3 -m bench.small_space --shape 5: a row-wise kernel's 24 launch options, 1 shape
#   small6   python3 -m bench.small_space: the same over 6 shapes (micro-second shapes among them)
#   pairs    python3 -m bench.cli_run on layer_norm_decode.yaml, --exhaustive: 24 micro-second
#            shapes × 24 launch options, the rate of timed (configuration, shape) pairs
#            (the peers on the same pairs: python3 -m bench.small_space on it)
#   matrix   python3 -m bench.matrix_exhaustive: the layer-norm matrix, search vs exhaustive
#   suite    python3 -m bench.cli_run on softmax, layer norm, attention and the CUDA row sum, 40
#            evaluations each: the winner's search value against its re-measured value
#   llm-sweep  bash bench/sweep.sh: one part (SWEEP_LIMIT seconds, default 540) of the LLM GEMM
#            matrix's exhaustive sweep into runs/llm_sweep (carry it to the next call)
#   llm      python3 -m bench.matrix_exhaustive on matmul_llm.yaml against that finished sweep
#            (its wall time: the sum of its parts'), or without one the H200 sweep recorded in
#            docs/data/matrix_sweeps/h200_matmul_llm_fp16, with @triton.autotune over the
#            Triton tutorial's list and cuBLAS
set -uo pipefail
out=${1:?usage: bash bench/unit_of_work.sh OUT [STEP ...]}
shift
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(matmul small1 small6 matrix)
work=$(mktemp -d)
desc=examples/kernels/triton
mkdir -p "$out"
export PYTHONUNBUFFERED=1
ran() {  # name, limit in seconds, command… (its output folder $work/name): run it, keep its
  # output, go on if it fails
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
  echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - t0)) s"
}
for step in "${steps[@]}"; do
  case $step in
    matmul) ran matmul 150 python3 -m bench.cli_run "$desc/matmul_persistent.yaml" \
      --out "$work/matmul" -- --budget 100 --validate-top 3 ;;
    small1) ran small1 150 python3 -m bench.small_space "$desc/layer_norm_launch.yaml" --shape 5 \
      --out "$work/small1" ;;
    small6) ran small6 240 python3 -m bench.small_space "$desc/layer_norm_launch.yaml" \
      --out "$work/small6" ;;
    pairs) ran pairs 300 python3 -m bench.cli_run "$desc/layer_norm_decode.yaml" \
      --out "$work/pairs" -- --exhaustive --validate-top 3 ;;
    matrix) ran matrix 300 python3 -m bench.matrix_exhaustive "$desc/layer_norm_matrix.yaml" \
      --out "$work/matrix" ;;
    suite)
      for kernel in triton/softmax triton/layer_norm triton/attention cuda/row_sum; do
        name=suite-${kernel#*/}
        ran "$name" 90 python3 -m bench.cli_run "examples/kernels/$kernel.yaml" \
          --out "$work/$name" -- --budget 40 --validate-top 3
      done ;;
    llm-sweep) ran llm-sweep $((${SWEEP_LIMIT:-540} + 90)) bash bench/sweep.sh \
      "$desc/matmul_llm.yaml" runs/llm_sweep "${SWEEP_LIMIT:-540}" ;;
    llm)
      sweep=runs/llm_sweep log=runs/llm_sweep.log
      if [[ ! -d $sweep ]]; then  # the H200 sweep recorded in docs/data
        sweep=docs/data/matrix_sweeps/h200_matmul_llm_fp16 log=$sweep/sweep.log
      fi
      swept=$(awk '/^== part: exit/ {s += $(NF - 5)} END {print s}' "$log")
      ran llm 600 python3 -m bench.matrix_exhaustive "$desc/matmul_llm.yaml" --out "$work/llm" \
        --exhaustive-from "$sweep" --exhaustive-s "$swept" \
        --autotune bench/data/matmul_tutorial_configs.yaml ;;
    *) echo "unknown step $step" ;;
  esac
done
# Every run's own log (the command's lines with their times) in one file.
(cd "$work" && find . -name 'triton-cache-*' -prune -o \( -name '*.log' -o -name '*.json' \) -print |
  tar -czf "$out/logs.tar.gz" -T -)
rm -rf "$work"
