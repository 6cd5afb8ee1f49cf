#!/usr/bin/env bash
# Streaming a Parquet dataset of image observations, at least 8 GB on disk,
# through BC, and the resident memory it takes (the offline issue's scale
# benchmark).
#
#   bash benches/offline/stream.sh [rlx binary] [work dir]
#
# Needs the Gymnasium bridge's Python ($RLX_PYTHON, with ale-py and
# pyarrow: the test venv under target/python has both) and about 8.5 GB
# of free disk, which it gives back at the end. Prints GNU time's report
# of each run (look for "Maximum resident set size").
set -euo pipefail
RLX=${1:-target/release/rlx}
WORK=${2:-/tmp/rlx-stream}
PY=${RLX_PYTHON:-python3}
mkdir -p "$WORK"
# A few steps of Breakout written by rlx: the schema and _dataset.json.
"$RLX" train --run PPO --env gym:ALE/Breakout-v5 --stop '{"timesteps_total": 200}' \
  --config "{\"output\": \"$WORK/like\", \"output_format\": \"parquet\", \"train_batch_size\": 128, \"sgd_minibatch_size\": 64}" \
  --results-dir "$WORK/runs" > /dev/null 2>&1
"$PY" "$(dirname "$0")/make_big_dataset.py" --like "$WORK/like" --out "$WORK/big" --gb 8.05 --rows-per-file 1000
du -sh "$WORK/big"
# One pass over the rows (36,000 of them), minibatches of 500, then of
# the default 2,000 for a third of a pass.
for run in "36000 500" "12000 2000"; do
  set -- $run
  /usr/bin/time -v "$RLX" train --run BC --env gym:ALE/Breakout-v5 --stop "{\"timesteps_total\": $1}" \
    --config "{\"input\": \"$WORK/big\", \"train_batch_size\": $2}" --results-dir "$WORK/runs" 2>&1 |
    grep -E "^done|Maximum resident|Elapsed"
done
rm -rf "$WORK"
