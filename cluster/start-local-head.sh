#!/usr/bin/env bash
# Start a Ray head on this machine with all of its GPUs, the dashboard bound to 127.0.0.1 only.
#     bash cluster/start-local-head.sh [extra `ray start` arguments]
# Then: ciq-tune tune DESCRIPTION --address auto   (or ray.init(address="auto") in Python).
# Reach the dashboard from elsewhere through an SSH tunnel: ssh -L 8265:127.0.0.1:8265 HOST
# With CUDA_VISIBLE_DEVICES set, the head offers the GPUs it lists (Ray refuses a larger count).
set -euo pipefail
gpus=0
if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
  IFS=, read -ra listed <<< "$CUDA_VISIBLE_DEVICES"
  for device in "${listed[@]}"; do
    [[ -n ${device// /} ]] && gpus=$((gpus + 1))
  done
elif command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | grep -c '^GPU ' || true)
fi
ray=${RAY:-ray}
exec "$ray" start --head --num-gpus="$gpus" --dashboard-host=127.0.0.1 "$@"
