#!/usr/bin/env bash
# 2026-12-06: BC's minibatch in two halves side by side on the CPU;
# optimizer groups (critics | value, actor) stepped side by side; IQL's
# V(s') on the critics' side of its update; Adam's loop 8 wide; the
# gradient norm over eight running sums; one copy of each gradient out of
# dfdx, none zeroed; result files synced to disk at most once a second
# (were: every iteration); against the build before (OLD, a copy of
# d3309d8's release binary).
#   1. Same numbers where only speed changed: every result line's
#      returns, losses and learner statistics (times left out) of short
#      seeded runs, old against new. BC at 200 rows an update (fewer than
#      the 256 that split) too; BC at 256 rows splits, and its numbers
#      differ in rounding: its runs are compared by their evaluations.
#   2. Speed: benches/offline/speed.sh on the HalfCheetah files, BC, IQL
#      and CQL, old and new and d3rlpy (one thread and torch's default),
#      three rounds, alone on the machine.
#
#   OLD=/tmp/rlx-cql NEW=target/release/rlx PY=/tmp/d3env/bin/python bash run.sh
#
# SKIP_SAME=1 or SKIP_SPEED=1 leaves out a part.
set -euo pipefail
OLD=${OLD:-/tmp/rlx-cql}
NEW=${NEW:-target/release/rlx}
PY=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
DATA=$here/../halfcheetah-2026-12-06/data
W=$(mktemp -d)
NET='"model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}'
# shellcheck source=../../same.sh
source "$here/../../same.sh"
if [ "${SKIP_SAME:-0}" != 1 ]; then
{
same PPO-CartPole --run PPO --env CartPole-v1 --seed 1 --stop '{"timesteps_total": 40000}'
same SAC-Pendulum --run SAC --env Pendulum-v1 --seed 1 --stop '{"timesteps_total": 3000}'
same DQN-CartPole --run DQN --env CartPole-v1 --seed 1 --stop '{"timesteps_total": 10000}'
same BC-HalfCheetah-200-rows --run BC --env gym:HalfCheetah-v5 --seed 1 --stop '{"training_iteration": 2000}' \
  --config "{\"input\": \"$DATA\", \"train_batch_size\": 200, \"lr\": 0.001, $NET, \"evaluation_interval\": 2000, \"evaluation_duration\": 2}"
same IQL-HalfCheetah --run IQL --env gym:HalfCheetah-v5 --seed 1 --stop '{"timesteps_total": 3000}' \
  --config "{\"input\": \"$DATA\", \"learning_starts\": 0, \"timesteps_per_iteration\": 1000, $NET}"
same TD3-HalfCheetah --run TD3 --env gym:HalfCheetah-v5 --seed 1 --stop '{"timesteps_total": 400}' \
  --config "{\"input\": \"$DATA\", \"learning_starts\": 0, \"timesteps_per_iteration\": 100, $NET}"
same SAC-CQL-HalfCheetah --run SAC --env gym:HalfCheetah-v5 --seed 1 --stop '{"timesteps_total": 300}' \
  --config "{\"input\": \"$DATA\", \"min_q_weight\": 5.0, \"random_timesteps\": 0, \"learning_starts\": 0, \"timesteps_per_iteration\": 100, $NET}"
} 2>&1 | tee "$here/same-numbers.txt"
fi
if [ "${SKIP_SPEED:-0}" != 1 ]; then
  OLD=$OLD ENV=HalfCheetah-v5 ALGORITHMS="BC IQL CQL" D3RLPY_THREADS="1 0" \
    bash "$here/../../speed.sh" "$DATA" "$NEW" "$PY" 2>&1 | tee "$here/speed.txt"
fi
rm -rf "$W"
