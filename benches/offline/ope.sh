#!/usr/bin/env bash
# Off-policy estimates of a MARWIL policy on CartPole, with the linear and
# the network's fitted Q, beside the policy's own discounted return.
#
# PPO (seed 2) writes its first 40,000 steps, poor to solved; MARWIL then
# trains 200 batches from them, estimating its policy's return from 100
# logged episodes every 50 batches (is, wis, dm, dr; gamma 0.99), once
# with `off_policy_estimation_q_model` linear and once neural (the same
# seed: the same policies). Each evaluation plays 20 episodes with the
# same stochastic policy the estimates are of (`explore: true`); CartPole
# pays 1 a step, so an episode of L steps is worth (1 - 0.99^L) / 0.01,
# 99.3 at 500.
#
#   bash benches/offline/ope.sh [rlx binary] [work dir]
set -euo pipefail
RLX=${1:-target/release/rlx}
WORK=${2:-/tmp/rlx-ope}
rm -rf "$WORK" && mkdir -p "$WORK"
"$RLX" train --run PPO --env CartPole-v1 --seed 2 --stop '{"timesteps_total": 40000}' \
  --config "{\"output\": \"$WORK/mix\"}" --results-dir "$WORK/ppo" > /dev/null 2>&1
for model in linear neural; do
  config="{\"input\": \"$WORK/mix\", \"evaluation_interval\": 50, \"evaluation_duration\": 20,
    \"evaluation_config\": {\"explore\": true}, \"off_policy_estimation_methods\": [\"is\", \"wis\", \"dm\", \"dr\"],
    \"off_policy_estimation_q_model\": {\"type\": \"$model\"}}"
  /usr/bin/time -f "%e s wall" "$RLX" train --run MARWIL --env CartPole-v1 --seed 1 \
    --stop '{"training_iteration": 200}' --config "$config" --results-dir "$WORK/$model" > "$WORK/$model.log" 2>&1
  echo "q_model $model ($(tail -1 "$WORK/$model.log")):"
  python3 "$(dirname "$0")/ope_table.py" "$WORK/$model" cartpole
done
