#!/usr/bin/env bash
# Off-policy estimates of continuous policies on Pendulum-v1, beside each
# policy's own return.
#
# Pendulum's episodes all last 200 steps, so with gamma 1 an estimate is
# of the plain return that an evaluation measures by playing. Two
# datasets, two learners, each estimating its stochastic policy from 100
# logged episodes at four evaluations, with the linear and the network's
# fitted Q (the same seed: the same policies), and evaluations of 20
# episodes with that same stochastic policy (`explore: true`):
#
# - PPO (seed 1) writes its first 20,000 steps, with the log-density of
#   each action it drew; BC (gamma 1, 200 batches) learns from them: is,
#   wis, dm, dr.
# - SAC (seed 1) writes its first 6,000 steps (uniformly random for the
#   first 1,000), with the log-density of each action; CQL (SAC with
#   min_q_weight 5, gamma 1, 40 iterations) learns from them: is, wis,
#   dm, dr.
#
#   bash benches/offline/ope_pendulum.sh [rlx binary] [work dir]
set -euo pipefail
RLX=${1:-target/release/rlx}
WORK=${2:-/tmp/rlx-ope-pendulum}
rm -rf "$WORK" && mkdir -p "$WORK"
"$RLX" train --run PPO --env Pendulum-v1 --seed 1 --stop '{"timesteps_total": 20000}' \
  --config "{\"output\": \"$WORK/ppo-data\"}" --results-dir "$WORK/ppo" > /dev/null 2>&1
"$RLX" train --run SAC --env Pendulum-v1 --seed 1 --stop '{"timesteps_total": 6000}' \
  --config "{\"output\": \"$WORK/sac-data\"}" --results-dir "$WORK/sac" > /dev/null 2>&1
common='"gamma": 1.0, "evaluation_duration": 20, "evaluation_config": {"explore": true},
  "off_policy_estimation_methods": ["is", "wis", "dm", "dr"]'
for model in linear neural; do
  q="\"off_policy_estimation_q_model\": {\"type\": \"$model\"}"
  bc="{\"input\": \"$WORK/ppo-data\", $common, $q, \"evaluation_interval\": 50}"
  cql="{\"input\": \"$WORK/sac-data\", $common, $q, \"evaluation_interval\": 10,
    \"min_q_weight\": 5.0, \"num_actions\": 4, \"train_batch_size\": 128, \"random_timesteps\": 0}"
  for run in BC CQL; do
    if [ $run = BC ]; then algo=BC config=$bc iterations=200; else algo=SAC config=$cql iterations=40; fi
    /usr/bin/time -f "%e s wall" "$RLX" train --run $algo --env Pendulum-v1 --seed 1 \
      --stop "{\"training_iteration\": $iterations}" --config "$config" --results-dir "$WORK/$run-$model" \
      > "$WORK/$run-$model.log" 2>&1
    echo "$run, q_model $model ($(tail -1 "$WORK/$run-$model.log")):"
    python3 "$(dirname "$0")/ope_table.py" "$WORK/$run-$model" return
  done
done
