#!/usr/bin/env bash
# RLlib 2.60's CQL on rlx's Pendulum files to 9,000 updates (the schedule of
# rlx's and d3rlpy's CQL in results/pendulum-2026-12-03), seed SEED
# (default 1; the data is always the behaviour run of seed 1), alone on
# the 2-core machine. The data is pendulum.sh's, made again with the build
# of c060c0a (`rlx dataset info`: 30 episodes, 6,000 steps, returns mean
# −743.07, std 571.95, the same statistics as pendulum-2026-12-03's).
#
#   [SEED=2] bash run.sh <rlx binary> <python with ray[rllib]==2.60.0 and torch>
set -euo pipefail
seed=${SEED:-1}
here=$(cd "$(dirname "$0")" && pwd) data=$(mktemp -d)/data
"$1" train --run SAC --env Pendulum-v1 --seed 1 --stop '{"timesteps_total": 6000}' \
  --config "{\"output\": \"$data\", \"output_format\": \"parquet\"}" --results-dir "$(dirname "$data")/behaviour" > /dev/null 2>&1
"$1" dataset info "$data" > "$here/dataset-info.txt"
timeout 2300 "$2" "$here/../../rllib_reads_rlx.py" "$data" Pendulum-v1 9 --algo CQL --updates 1000 --seed "$seed" \
  --out "$here/CQL-rllib-2.60-seed$seed.json" 2>&1 | grep -E '^[0-9]+ ' | tee "$here/CQL-rllib-2.60-seed$seed.txt"
