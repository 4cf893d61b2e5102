#!/usr/bin/env bash
# An exhaustive sweep of a matrix description, in parts of at most LIMIT seconds: the first part
# starts `ciq-tune tune DESC --exhaustive --runtime local --validate-top 0` into RUN; each later
# one continues it (`ciq-tune resume RUN`) until every configuration is timed at every shape and
# the controls file is written. A part ends with SIGINT at LIMIT (the run keeps every finished
# evaluation and the engine's state) and prints its wall time; the sweep's wall time is the sum
# of its parts'. The reference of `python3 -m bench.matrix_exhaustive DESC --exhaustive-from RUN`.
#     bash bench/sweep.sh DESC RUN LIMIT
set -uo pipefail
desc=${1:?usage: bash bench/sweep.sh DESC RUN LIMIT}
run=${2:?usage: bash bench/sweep.sh DESC RUN LIMIT}
limit=${3:?usage: bash bench/sweep.sh DESC RUN LIMIT}
export PYTHONUNBUFFERED=1
mkdir -p "$(dirname "$run")"
if [[ -f $run/search_state.json ]]; then
  command=(python3 -m ciq_tune.cli resume "$run")
else
  command=(python3 -m ciq_tune.cli tune "$desc" --exhaustive --runtime local --validate-top 0
    --tracking none --out "$run")
fi
t0=$SECONDS
# The first SIGINT stops the search gracefully (running evaluations finish); a minute later, a
# kill.
timeout -s INT -k 60 "$limit" "${command[@]}" 2>&1 | tee -a "$run.log"
status=${PIPESTATUS[0]}
evaluated=$(($(wc -l < "$run/evaluations.csv") - 1))
echo "== part: exit $status after $((SECONDS - t0)) s; $evaluated evaluations in $run/evaluations.csv" |
  tee -a "$run.log"
