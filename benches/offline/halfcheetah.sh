#!/usr/bin/env bash
# Offline learning on MuJoCo's HalfCheetah-v5 from a SAC run's episodes (a
# medium-replay mix: 10,000 random steps, then a learning SAC),
# beside d3rlpy on the very same Parquet files: BC, IQL and continuous CQL
# (SAC with `min_q_weight`), 100,000 updates a run, networks of two
# 256-wide ReLU layers, batches of 256, greedy evaluations of 10 episodes
# every 10,000 updates (rlx's IQL and CQL: every 5,000).
#
#   bash benches/offline/halfcheetah.sh [rlx binary] [out dir] [python with d3rlpy]
#
# ALGORITHMS (default "BC IQL CQL") and SEEDS (default "1 2 3") pick the
# runs; SIDES (default "rlx d3rlpy") the libraries; UPDATES (default
# 100,000) the updates a run, EVERY (default 5,000) the updates between
# rlx's IQL and CQL evaluations and TRIALS (default 10) their episodes
# (smaller values check the script itself). Needs RLX_PYTHON (or
# python3) with gymnasium[mujoco] for rlx's evaluations. d3rlpy's torch
# gets one thread (D3RLPY_THREADS): with the other side running beside it,
# torch's default of one a core slowed its BC thirtyfold.
#
# Writes <out>/data (the dataset, made only where it is missing),
# <out>/<ALGO>-<seed>/ (rlx's result.json, evaluation lines only) and
# <out>/d3rlpy/*.json.
#
# A run a sitting stopped goes on when the script is run again: d3rlpy's
# from its state after its last evaluation (`--resume`), rlx's CQL from its
# newest checkpoint (one every EVERY updates, and one where Ctrl-C stops
# it). The stopped run's directory moves to <out>/CQL-<seed>/stopped/; the
# resumed run's result.json holds the whole history. Its replay buffer is
# not in the checkpoint: the resumed run first reads the dataset again
# (ROWS env steps without updates, evaluated like the first run's start),
# so its stop is moved by the dataset's rows. Not an exact resume: the
# minibatches drawn after it differ from an unbroken run's.
set -euo pipefail
RLX=${1:-target/release/rlx}
OUT=${2:-benches/offline/results/halfcheetah-$(date +%F)}
PY=${3:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../scripts/live_run.sh"
mkdir -p "$OUT"
NET='"model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}'
UPDATES=${UPDATES:-100000}
EVERY=${EVERY:-5000}
EVAL='"evaluation_duration": '"${TRIALS:-10}"', "evaluation_config": {"explore": false}'
# The data: every episode of the SAC tuned example (seed 1) up to 40,000
# steps or the example's own 240-s limit, whichever comes first: on
# 2026-12-06 the limit, at 35,000 steps (10 random episodes, 25 of a
# learning SAC). A time limit does not repeat, so the files of that run are
# kept in results/halfcheetah-2026-12-06/data and are the ones to reuse.
if [ ! -f "$OUT/data/_dataset.json" ]; then
  "$RLX" train -f tuned_examples/sac-halfcheetah.yaml --seed 1 --stop '{"timesteps_total": 40000}' \
    --config "{\"output\": \"$OUT/data\", \"output_format\": \"parquet\"}" \
    --results-dir "$OUT/behaviour" > "$OUT/behaviour.log" 2>&1
fi
"$RLX" dataset info "$OUT/data" > "$OUT/dataset-info.txt"
ROWS=$(awk '/^steps:/ {print $2}' "$OUT/dataset-info.txt")

# Keeps a run's evaluation lines (and its last line): a result line an
# iteration would make BC's file 100,000 lines long.
keep_evaluations() {
  local run=$1 file
  file=$(ls "$run"/*/result.json)
  python3 -c "
import json, sys
lines = open(sys.argv[1]).read().splitlines()
kept = [l for l in lines if 'evaluation' in json.loads(l)] + lines[-1:]
open(sys.argv[1], 'w').write('\n'.join(dict.fromkeys(kept)) + '\n')" "$file"
  rm -rf "$run"/*/events.out.tfevents.* "$run"/*/checkpoint_* "$run"/stopped/*/events.out.tfevents.* "$run"/stopped/*/checkpoint_*
  # progress.csv has a row an iteration (BC: 100,000, 18 MB): keep every
  # 100th of a long one (IQL's and CQL's 27 rows stay).
  python3 -c "
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline='')))
it = rows[0].index('training_iteration')
kept = rows if len(rows) <= 1001 else [rows[0]] + [r for r in rows[1:] if int(r[it]) % 100 == 0]
csv.writer(open(sys.argv[1], 'w', newline='')).writerows(kept)" "$run"/*/progress.csv
}

# The env steps at which a stopped CQL run, resumed from checkpoint $1,
# has made UPDATES updates: the checkpoint's steps, the dataset read again
# into the empty buffer, then the updates still owed (one a row; the
# updates made so far are the rows trained on over the run's batch size,
# read from the result line of the checkpoint's iteration).
resumed_stop() {
  python3 - "$1" "$ROWS" "$UPDATES" <<'EOF'
import json, sys
ckpt, rows, updates = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
meta = json.load(open(f"{ckpt}/metadata.json"))
lines = []
for text in open(f"{ckpt}/../result.json"):
    try:
        lines.append(json.loads(text))
    except ValueError:
        pass  # a line torn by the kill: the checkpoint's line came before it
line = next(r for r in lines if r["training_iteration"] == meta["training_iteration"])
done = line["num_env_steps_trained"] // meta["config"]["train_batch_size"]
print(meta["timesteps_total"] + rows + max(updates - done, 0))
EOF
}

rlx_run() {
  local algo=$1 seed=$2
  local run="$OUT/$algo-$seed" stop=$((ROWS + UPDATES)) from=() ckpt trial
  if live_run "$run"; then
    echo "$run: a run is still writing there; not starting $algo seed $seed again" >&2
    return 0
  fi
  ckpt=$(ls -d "$run"/*/checkpoint_* 2>/dev/null | sort | tail -n 1 || true)
  if [ "$algo" = CQL ] && [ -n "$ckpt" ]; then
    trial=$(dirname "$ckpt")
    mkdir -p "$run/stopped"
    mv "$trial" "$run/stopped/"
    ckpt="$run/stopped/$(basename "$trial")/$(basename "$ckpt")"
    stop=$(resumed_stop "$ckpt")
    from=(--restore "$ckpt")
    echo "== $(date -u +%FT%TZ) resumed from $ckpt, to $stop env steps" >> "$run.log"
  else
    rm -rf "$run"
    : > "$run.log"
  fi
  case $algo in
    # MARWIL's Gaussian actor with beta 0: one update of 256 rows an
    # iteration, at 1e-3 as d3rlpy's BC.
    BC) "$RLX" train --run BC --env gym:HalfCheetah-v5 --seed "$seed" --stop "{\"training_iteration\": $UPDATES}" \
          --config "{\"input\": \"$OUT/data\", \"train_batch_size\": 256, \"lr\": 0.001, $NET, \"evaluation_interval\": $((UPDATES / 10)), $EVAL}" \
          --results-dir "$run" >> "$run.log" 2>&1 ;;
    # The whole dataset goes into the replay buffer before the first update
    # (`learning_starts` = its rows), so that every minibatch is drawn from
    # all of it, as d3rlpy's are; then one update a row read: 100,000.
    # (With `learning_starts` 0 the first updates see only the rows read so
    # far: here the random episodes at the front of the file.)
    # `buffer_size` is the dataset's rows: the reader goes on through the
    # file pass after pass, and a larger buffer (IQL's default 1,000,000,
    # SAC's 100,000) kept the extra copies, up to a pass's worth of rows
    # twice as often as the others. At the dataset's size each window of
    # rows read replaces the same rows' earlier copies (one file, its
    # episodes read in the same order each pass; while a window's shuffled
    # rows are read, some of its rows are held twice and some not yet), so
    # minibatches are drawn from the dataset about evenly, as d3rlpy's are. The IQL and CQL runs of 2026-12-06 before `IQLuniform`
    # ran with the default buffers. Builds from dad98b8 on hold a dataset
    # that fits in the buffer exactly once whatever `buffer_size` (later
    # passes' rows are not stored again); the setting stays so that runs
    # of older builds compare.
    IQL) "$RLX" train --run IQL --env gym:HalfCheetah-v5 --seed "$seed" --stop "{\"timesteps_total\": $stop}" \
          --config "{\"input\": \"$OUT/data\", \"learning_starts\": $ROWS, \"buffer_size\": $ROWS, \"timesteps_per_iteration\": $EVERY, $NET, \"evaluation_interval\": 1, $EVAL}" \
          --results-dir "$run" >> "$run.log" 2>&1 ;;
    # A checkpoint every iteration, the newest kept: a run a sitting
    # stopped goes on from it (above).
    CQL) "$RLX" train --run SAC --env gym:HalfCheetah-v5 --seed "$seed" "${from[@]}" --checkpoint-freq 1 --keep-checkpoints-num 1 --stop "{\"timesteps_total\": $stop}" \
          --config "{\"input\": \"$OUT/data\", \"min_q_weight\": 5.0, \"random_timesteps\": 0, \"learning_starts\": $ROWS, \"buffer_size\": $ROWS, \"actor_lr\": 0.0003, \"critic_lr\": 0.0003, \"alpha_lr\": 0.0003, \"timesteps_per_iteration\": $EVERY, $NET, \"evaluation_interval\": 1, $EVAL}" \
          --results-dir "$run" >> "$run.log" 2>&1 ;;
  esac
  keep_evaluations "$run"
}

for seed in ${SEEDS:-1 2 3}; do
  for algo in ${ALGORITHMS:-BC IQL CQL}; do
    for side in ${SIDES:-rlx d3rlpy}; do
      if [ "$side" = rlx ]; then
        rlx_run "$algo" "$seed"
      elif [ "$side" = d3rlpy ]; then
        # --resume: a run stopped part way (a session's end) goes on from
        # its last evaluation's state when the script is run again; the
        # log is appended to, so no earlier sitting's lines are lost.
        echo "== $(date -u +%FT%TZ)" >> "$OUT/d3rlpy-$algo-$seed.log"
        "$PY" "$HERE/d3rlpy_side.py" "$OUT/data" "$OUT/d3rlpy" --env HalfCheetah-v5 --hidden 256 --resume \
          --updates "$UPDATES" --every $((UPDATES / 10)) --trials "${TRIALS:-10}" --threads "${D3RLPY_THREADS:-1}" --seeds "$seed" --algorithms "$algo" >> "$OUT/d3rlpy-$algo-$seed.log" 2>&1
      fi
    done
  done
done
python3 "$HERE/summary.py" "$OUT" | tee "$OUT/summary.txt"
