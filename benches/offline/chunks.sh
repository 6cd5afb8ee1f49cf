#!/usr/bin/env bash
# BC's resident memory on image minibatches, whole and in chunks: a
# Parquet dataset of about 1 GB of random Breakout frames (84x84x4, as
# stream.sh's, smaller), then BC with minibatches of 2,000 rows for three
# steps, with `learner_chunk_rows` 0 (the whole minibatch in one pass)
# and 250, alternating, RUNS times each, under GNU time.
#
#   bash benches/offline/chunks.sh [rlx binary] [work dir] [runs]
#
# Needs the Gymnasium bridge's Python ($RLX_PYTHON, with ale-py and
# pyarrow). Prints each run's wall time, maximum resident set size and
# learner losses.
set -euo pipefail
RLX=${1:-target/release/rlx}
WORK=${2:-/tmp/rlx-chunks}
RUNS=${3:-3}
PY=${RLX_PYTHON:-python3}
mkdir -p "$WORK"
"$RLX" train --run PPO --env gym:ALE/Breakout-v5 --stop '{"timesteps_total": 200}' \
  --config "{\"output\": \"$WORK/like\", \"output_format\": \"parquet\", \"train_batch_size\": 128, \"sgd_minibatch_size\": 64}" \
  --results-dir "$WORK/runs" > /dev/null 2>&1
"$PY" "$(dirname "$0")/make_big_dataset.py" --like "$WORK/like" --out "$WORK/big" --gb 1.0 --rows-per-file 1000
for run in $(seq "$RUNS"); do
  for chunk in 0 250; do
    out="$WORK/bc-$chunk-$run"
    /usr/bin/time -v "$RLX" train --run BC --env gym:ALE/Breakout-v5 --stop '{"timesteps_total": 6000}' \
      --config "{\"input\": \"$WORK/big\", \"train_batch_size\": 2000, \"learner_chunk_rows\": $chunk, \"seed\": 1}" \
      --results-dir "$out" > "$out.log" 2>&1
    losses=$(python3 -c "import json,glob; print([round(json.loads(l)['learner']['policy_loss'], 5) for l in open(glob.glob('$out/*/result.json')[0])])")
    echo "chunk $chunk run $run: $(grep -E 'Elapsed' "$out.log" | awk '{print $NF}') wall, $(grep 'Maximum resident' "$out.log" | awk '{print $NF}') kB max RSS, policy_loss $losses"
  done
done
rm -rf "$WORK"
