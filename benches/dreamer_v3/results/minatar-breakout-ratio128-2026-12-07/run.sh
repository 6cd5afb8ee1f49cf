#!/bin/bash
# DreamerV3 on MinAtar Breakout's pixels, as ../minatar-breakout-2026-12-05/
# but at training_ratio 128 (one update of 16 x 32 replayed steps per 4 env
# steps, twice that run's) and with the code of 2026-12-07: micro model,
# 100k env steps, greedy evaluation of 10 episodes every 10k steps.
#
#   SEED=N bash run.sh   (writes seedN/ and seedN.log here)
#
# On 2026-12-07 seeds 1 and 2 ran one after the other, each beside rlx's
# CQL HalfCheetah run (benches/offline), so their wall times are no speed
# figures; seed 1 under a two-hour limit, seed 2 under the 77 minutes the
# session had left (SECONDS_LIMIT).
here=$(cd "$(dirname "$0")" && pwd)
seed=${SEED:-1}
timeout "${SECONDS_LIMIT:-7200}" "${RLX:-target/release/rlx}" train --run DreamerV3 --env MinAtar/Breakout-v1 --seed "$seed" \
  --config '{"model_size": "micro", "batch_size_B": 16, "batch_length_T": 32, "training_ratio": 128, "learning_starts": 1024, "timesteps_per_iteration": 5000, "evaluation_interval": 2, "evaluation_duration": 10}' \
  --stop '{"timesteps_total": 100000}' --results-dir "$here/seed$seed" > "$here/seed$seed.log" 2>&1
