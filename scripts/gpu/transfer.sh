#!/usr/bin/env bash
# Transfer across GPUs on real hardware (docs/benchmarks.md, "Replays of recorded spaces").
#   earlier: one search of DESCRIPTION (seed 0, BUDGET evaluations); its evaluations table is
#            written to $OUT/earlier.csv
#   compare: per SEED, a search from scratch and one `--transfer-from EARLIER_CSV`, BUDGET
#            evaluations each (VALIDATE_TOP, default 0: each winner re-measured against the
#            default when 1); one row per search in $OUT/compare.csv, their output in
#            $OUT/compare.log
# Run from the repo root with .whl carried (../shared/tools/gpu-wheels.sh):
#   bash scripts/gpu/transfer.sh earlier DESCRIPTION BUDGET
#   bash scripts/gpu/transfer.sh compare DESCRIPTION BUDGET EARLIER_CSV SEED...
set -uo pipefail
mode=$1 desc=$2 budget=$3
export PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled PYTHONPATH=$PWD:/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
search() { timeout 280 python3 -m ciq_tune.cli tune "$desc" --budget "$budget" --tracking none --quiet "$@"; }
if [[ $mode == earlier ]]; then
  search --seed 0 --validate-top 0 --out /tmp/earlier 2>&1 | grep -v -E "WARNING|INFO" | tail -5
  cp /tmp/earlier/evaluations.csv "$OUT/earlier.csv"
  exit
fi
earlier=$4
shift 4
for seed in "$@"; do
  for arm in scratch transfer; do
    from=()
    [[ $arm == transfer ]] && from=(--transfer-from "$earlier")
    echo "== $arm seed $seed" >>"$OUT/compare.log"
    search --seed "$seed" --validate-top "${VALIDATE_TOP:-0}" --out "/tmp/runs/$arm-$seed" "${from[@]}" \
      >>"$OUT/compare.log" 2>&1
  done
done
python3 -m bench.transfer /tmp/runs "$OUT/compare.csv"
