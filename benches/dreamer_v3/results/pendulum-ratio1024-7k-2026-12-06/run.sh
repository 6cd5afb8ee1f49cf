#!/usr/bin/env bash
# 2026-12-06 (second session): DreamerV3 on Pendulum at two updates per
# env step (training_ratio 1024 with 16 x 32 sequences), the tuned example
# otherwise, greedy evaluation of 10 episodes every 1,000 env steps, to a
# greedy -200 or 7,000 env steps: SAC's defaults reached -200 at 4,000,
# 5,000 and 7,000 on seeds 1-3 (../pendulum-ratio512-2026-12-06/), so
# 7,000 answers whether DreamerV3 needs fewer on each seed. One run at a
# time, at low priority beside the offline benchmark: wall times are not
# speed figures.
set -euo pipefail
RLX=${RLX:-$(pwd)/target/release/rlx}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
for seed in ${SEEDS:-3 1 2}; do
  rm -rf dreamerv3-seed$seed
  nice -n 10 "$RLX" train -f ../../../../tuned_examples/dreamerv3-pendulum.yaml --seed $seed \
    --stop '{"evaluation/episode_reward_mean": -200, "timesteps_total": 7000}' \
    --config '{"evaluation_interval": 1, "evaluation_duration": 10, "timesteps_per_iteration": 1000, "training_ratio": 1024, "model_size": "micro", "learning_starts": 1024}' \
    --results-dir dreamerv3-seed$seed > dreamerv3-seed$seed.log 2>&1
done
