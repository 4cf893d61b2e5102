#!/usr/bin/env bash
# The whole-run figures of docs/benchmarks.md ("The matrix as the unit of work") on one GPU:
# each step is one of the bench scripts below, from a cold Triton cache, its table printed as it
# ends and its JSON and log copied to OUT. Run from the repository root on a GPU machine:
#     bash bench/unit_of_work.sh OUT [STEP ...]
# Steps (default: all, in this order):
#   matmul   python3 -m bench.cli_run: the persistent matmul 4096³, 100 evaluations, validated
#   small1   python3 -m bench.small_space --shape 5: a row-wise kernel's 24 launch options, 1 shape
#   small6   python3 -m bench.small_space: the same over 6 shapes (micro-second shapes among them)
#   matrix   python3 -m bench.matrix_exhaustive: the layer-norm matrix, search vs exhaustive
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
  # JSON and log, go on if it fails
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
  echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - t0)) s"
  cp "$work/$name"/*.json "$out/" 2>/dev/null
}
for step in "${steps[@]}"; do
  case $step in
    matmul) ran matmul 150 python3 -m bench.cli_run "$desc/matmul_persistent.yaml" \
      --out "$work/matmul" -- --budget 100 --validate-top 3 ;;
    small1) ran small1 150 python3 -m bench.small_space "$desc/layer_norm_launch.yaml" --shape 5 \
      --out "$work/small1" ;;
    small6) ran small6 240 python3 -m bench.small_space "$desc/layer_norm_launch.yaml" \
      --out "$work/small6" ;;
    matrix) ran matrix 300 python3 -m bench.matrix_exhaustive "$desc/layer_norm_matrix.yaml" \
      --out "$work/matrix" ;;
    *) echo "unknown step $step" ;;
  esac
done
rm -rf "$work"
