#!/usr/bin/env bash
# 2026-12-06: DreamerV3 on Pendulum at two updates per env step
# (training_ratio 1024 with 16 x 32 sequences, RLlib's ratio; the tuned
# example otherwise), seeds 1 and 2 side by side, one per core, greedy
# evaluation of 10 episodes every 1,000 env steps, to a greedy -200 or
# 4,000 env steps (SAC's defaults: 4,000, 5,000, 7,000; the budget is what
# the session's remaining time allowed).
set -euo pipefail
RLX=${RLX:-target/release/rlx}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
for seed in 1 2; do
  rm -rf dreamerv3-seed$seed
  "$RLX" train -f ../../../../tuned_examples/dreamerv3-pendulum.yaml --seed $seed \
    --stop '{"evaluation/episode_reward_mean": -200, "timesteps_total": 4000}' \
    --config '{"evaluation_interval": 1, "evaluation_duration": 10, "timesteps_per_iteration": 1000, "training_ratio": 1024, "model_size": "micro", "learning_starts": 1024}' \
    --results-dir dreamerv3-seed$seed > dreamerv3-seed$seed.log 2>&1 &
done
wait
