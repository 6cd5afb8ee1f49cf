#!/usr/bin/env bash
# 2026-12-06: CartPole seed 3 of the tuned example (training_ratio 512)
# again: the 2026-12-05 run was lost with its machine at 10,000 env steps
# (greedy 378.6 there). Today's code (fused softmax ops, so other floats
# than 8e0f4bb's), greedy evaluation of 10 episodes every 1,000 env steps,
# to a greedy 475 or 10,000 env steps, beside RLlib's Pendulum run.
set -euo pipefail
RLX=${RLX:-target/release/rlx}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
rm -rf dreamerv3-seed3
"$RLX" train -f ../../../../tuned_examples/dreamerv3-cartpole.yaml --seed 3 \
  --stop '{"evaluation/episode_reward_mean": 475, "timesteps_total": 10000}' \
  --config '{"evaluation_interval": 1, "evaluation_duration": 10, "timesteps_per_iteration": 1000}' \
  --results-dir dreamerv3-seed3 > dreamerv3-seed3.log 2>&1
