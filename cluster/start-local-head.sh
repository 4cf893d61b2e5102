#!/usr/bin/env bash
# Start a Ray head on this machine with all of its GPUs, the dashboard bound to 127.0.0.1 only.
#     bash cluster/start-local-head.sh [extra `ray start` arguments]
# Then: ciq-tune tune DESCRIPTION --address auto   (or ray.init(address="auto") in Python).
# Reach the dashboard from elsewhere through an SSH tunnel: ssh -L 8265:127.0.0.1:8265 HOST
set -euo pipefail
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | grep -c '^GPU ' || true)
fi
ray=${RAY:-ray}
exec "$ray" start --head --num-gpus="$gpus" --dashboard-host=127.0.0.1 "$@"
