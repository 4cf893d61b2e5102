#!/usr/bin/env bash
# Install ciq-tune with its test dependencies into .venv from scratch, run the static checks
# (scripts/lint.sh), then the tests in two tiers (tests/conftest.py):
#   fast: every test that starts no Ray (pytest -m "not ray"), on 2 pytest-xdist workers (the
#         CI machine's 2 cores; these tests share nothing but the file system's temp folders)
#   full: the fast tier, then the tests that use Ray (pytest -m ray: one shared Ray instance, so
#         one process; the examples, which start their own Ray, in a second one beside it)
# Usage: bash scripts/test.sh [fast|full] [pytest arguments…]   (default: full)
# GPU tests are marked `gpu` and skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=full
if [[ ${1:-} == fast || ${1:-} == full ]]; then
  tier=$1
  shift
fi
bash scripts/install.sh dev,gpu,helion,report
bash scripts/lint.sh
# Exit status 5 means "no test selected" (e.g. a -k that matches only one tier): not a failure.
tier_run() {
  local status=0
  .venv/bin/python -m pytest -q "$@" || status=$?
  if [[ $status -ne 0 && $status -ne 5 ]]; then
    exit "$status"
  fi
}
SECONDS=0
tier_run -m "not ray" --numprocesses 2 --durations 10 "$@"
echo "fast tier: ${SECONDS} s"
if [[ $tier == full ]]; then
  if [[ $# -eq 0 ]]; then
    # The examples start their own Ray in subprocesses: they run beside the tests that share
    # this process's Ray instead of after them (their trials are light; ~60 s less on 2 cores).
    examples_log=$(mktemp)
    (tier_run -m ray --durations 5 tests/test_examples.py) >"$examples_log" 2>&1 &
    examples=$!
    ray_status=0
    (tier_run -m ray --durations 10 --ignore=tests/test_examples.py) || ray_status=$?
    examples_status=0
    wait "$examples" || examples_status=$?
    echo "examples (run beside the tests above):"
    cat "$examples_log"
    rm -f "$examples_log"
    if [[ $ray_status -ne 0 ]]; then exit "$ray_status"; fi
    if [[ $examples_status -ne 0 ]]; then exit "$examples_status"; fi
  else
    tier_run -m ray --durations 10 "$@"
  fi
  echo "fast + Ray tiers: ${SECONDS} s"
fi
