#!/usr/bin/env bash
# Offline learning on Pendulum-v1 from a half-trained SAC's episodes (a
# medium-replay mix): BC, IQL, continuous CQL (SAC with `min_q_weight`)
# and plain SAC from the files, seeds 1-3, greedy evaluations of 20
# episodes.
#
#   bash benches/offline/pendulum.sh [rlx binary] [out dir]
#
# Writes <out>/data (the dataset), <out>/<algorithm>-<seed>/*/result.json
# and <out>/summary.txt (python3 benches/offline/summary.py <out>).
set -euo pipefail
RLX=${1:-target/release/rlx}
OUT=${2:-benches/offline/results/pendulum-$(date +%F)}
IQL_ROWS=${IQL_ROWS:-20000}
CQL_ROWS=${CQL_ROWS:-10000}
mkdir -p "$OUT"
EVAL='"evaluation_interval": 2, "evaluation_duration": 20, "evaluation_config": {"explore": false}'
# The data: every episode of SAC's first 6,000 steps (seed 1), from random
# play to a policy near -150, as Parquet (d3rlpy_side.py reads the same
# files).
if [ ! -f "$OUT/data/_dataset.json" ]; then
  "$RLX" train --run SAC --env Pendulum-v1 --seed 1 --stop '{"timesteps_total": 6000}' \
    --config "{\"output\": \"$OUT/data\", \"output_format\": \"parquet\"}" \
    --results-dir "$OUT/behaviour" > "$OUT/behaviour.log" 2>&1
fi
"$RLX" dataset info "$OUT/data" > "$OUT/dataset-info.txt"
for seed in 1 2 3; do
  # BC: MARWIL's Gaussian actor with beta 0, 100 batches of 2,000 rows.
  "$RLX" train --run BC --env Pendulum-v1 --seed $seed --stop '{"training_iteration": 100}' \
    --config "{\"input\": \"$OUT/data\", \"evaluation_interval\": 10, \"evaluation_duration\": 20, \"evaluation_config\": {\"explore\": false}}" \
    --results-dir "$OUT/BC-$seed" > /dev/null 2>&1
  "$RLX" train --run IQL --env Pendulum-v1 --seed $seed --stop "{\"timesteps_total\": $IQL_ROWS}" \
    --config "{\"input\": \"$OUT/data\", $EVAL}" --results-dir "$OUT/IQL-$seed" > /dev/null 2>&1
  "$RLX" train --run SAC --env Pendulum-v1 --seed $seed --stop "{\"timesteps_total\": $CQL_ROWS}" \
    --config "{\"input\": \"$OUT/data\", \"min_q_weight\": 5.0, \"random_timesteps\": 0, $EVAL}" \
    --results-dir "$OUT/CQL-$seed" > /dev/null 2>&1
  # Plain SAC from the same files: what the penalty adds.
  "$RLX" train --run SAC --env Pendulum-v1 --seed $seed --stop "{\"timesteps_total\": $CQL_ROWS}" \
    --config "{\"input\": \"$OUT/data\", \"random_timesteps\": 0, $EVAL}" \
    --results-dir "$OUT/SAC-$seed" > /dev/null 2>&1
done
python3 "$(dirname "$0")/summary.py" "$OUT" | tee "$OUT/summary.txt"
