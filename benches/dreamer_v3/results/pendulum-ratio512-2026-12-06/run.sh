#!/usr/bin/env bash
# 2026-12-06: DreamerV3 on Pendulum at one update per env step
# (training_ratio 512 with 16 x 32 sequences), the tuned example otherwise,
# greedy evaluation of 10 episodes every 1,000 env steps, to a greedy -200
# or 6,000 env steps: SAC's defaults reached -200 at 4,000 and 5,000
# (../pendulum-env-steps-2026-12-05/), so 6,000 answers whether DreamerV3
# needs fewer. RLX is a release build; it shares the two cores with
# RLlib's runs (one torch thread), so wall times are not speed figures.
set -euo pipefail
RLX=${RLX:-target/release/rlx}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
for seed in ${SEEDS:-1 2 3}; do
  rm -rf dreamerv3-seed$seed
  "$RLX" train -f ../../../../tuned_examples/dreamerv3-pendulum.yaml --seed $seed \
    --stop '{"evaluation/episode_reward_mean": -200, "timesteps_total": 6000}' \
    --config '{"evaluation_interval": 1, "evaluation_duration": 10, "timesteps_per_iteration": 1000, "training_ratio": 512, "model_size": "micro", "learning_starts": 1024}' \
    --results-dir dreamerv3-seed$seed > dreamerv3-seed$seed.log 2>&1
done
# SAC's defaults on the same evaluation, seeds 1-3, same binary and
# session (seeds 1 and 2 reached -200 at 4,000 and 5,000 on 2026-12-05).
for seed in ${SEEDS:-1 2 3}; do
  rm -rf SAC-seed$seed
  "$RLX" train --run SAC --env Pendulum-v1 --seed $seed \
    --stop '{"evaluation/episode_reward_mean": -200, "timesteps_total": 20000}' \
    --config '{"evaluation_interval": 1, "evaluation_duration": 10, "timesteps_per_iteration": 1000}' \
    --results-dir SAC-seed$seed > SAC-seed$seed.log 2>&1
done
