#!/usr/bin/env bash
# 2026-12-06: Adam and RMSprop with subnormal moments set to 0, against the
# build before (OLD, a copy of 8544d00's release binary) on the same seeded
# runs.
#   1. Same numbers: every result line's returns, losses and learner
#      statistics (times left out) of short seeded runs, old against new.
#   2. Speed: BC on the HalfCheetah files (halfcheetah.sh's settings, 256
#      rows an update, 10,000 updates, no evaluation), whole process timed,
#      old and new alternating, three runs each. The machine was shared
#      with the offline benchmark's other runs: a ratio within the session.
#
#   OLD=/tmp/rlx-base NEW=target/release/rlx bash run.sh
set -euo pipefail
OLD=${OLD:-/tmp/rlx-base}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../same.sh
source "$here/../../same.sh"
{
same_ppo_sac_dqn
same A2C-CartPole --run A2C --env CartPole-v1 --seed 1 --stop '{"timesteps_total": 20000}' --config '{"optimizer": "rmsprop"}'
same BC-HalfCheetah --run BC --env gym:HalfCheetah-v5 --seed 1 --stop '{"training_iteration": 3000}' \
  --config "{\"input\": \"$DATA\", \"train_batch_size\": 256, \"lr\": 0.001, $NET, \"evaluation_interval\": 3000, \"evaluation_duration\": 2}"
same IQL-HalfCheetah --run IQL --env gym:HalfCheetah-v5 --seed 1 --stop '{"timesteps_total": 3000}' \
  --config "{\"input\": \"$DATA\", \"learning_starts\": 0, \"timesteps_per_iteration\": 1000, $NET}"
} | tee "$here/same-numbers.txt"
for rep in 1 2 3; do
  for side in OLD NEW; do
    s=$(date +%s.%N)
    "${!side}" train --run BC --env gym:HalfCheetah-v5 --seed 1 --stop '{"training_iteration": 10000}' \
      --config "{\"input\": \"$DATA\", \"train_batch_size\": 256, \"lr\": 0.001, $NET}" --results-dir "$W/speed" > /dev/null 2>&1
    e=$(date +%s.%N)
    echo "$side $rep $(python3 -c "print(f'{10000 / ($e - $s):.1f}')") updates/s"
  done
done | tee "$here/speed.txt"
rm -rf "$W"
