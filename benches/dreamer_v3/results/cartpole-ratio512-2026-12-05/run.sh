#!/usr/bin/env bash
# 2026-12-05: DreamerV3 on CartPole at one update per env step, rlx and
# RLlib, and rlx's PPO defaults, all evaluated greedily over 10 episodes.
# RLX is a release build (8e0f4bb for DreamerV3, the next commit for PPO),
# PY a venv with ray[rllib] 2.60 and torch 2.15 (CPU).
set -euo pipefail
RLX=${RLX:-target/release/rlx} PY=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
for seed in 1 2 3; do
  # rlx DreamerV3: the tuned example, training_ratio 512 (16 x 32 replayed
  # steps per env step), to a greedy 475 or 20,000 env steps.
  rm -rf dreamerv3-seed$seed
  "$RLX" train -f ../../../../tuned_examples/dreamerv3-cartpole.yaml --seed $seed \
    --stop '{"evaluation/episode_reward_mean": 475, "timesteps_total": 20000}' \
    --config '{"evaluation_interval": 1, "evaluation_duration": 10, "timesteps_per_iteration": 1000, "training_ratio": 512}' \
    --results-dir dreamerv3-seed$seed > dreamerv3-seed$seed.log 2>&1
  # rlx PPO, its defaults, greedy evaluation every iteration (1,024 steps).
  rm -rf PPO-seed$seed
  "$RLX" train --run PPO --env CartPole-v1 --seed $seed \
    --stop '{"evaluation/episode_reward_mean": 475, "timesteps_total": 30000}' \
    --config '{"evaluation_interval": 1, "evaluation_duration": 10}' --results-dir PPO-seed$seed > PPO-seed$seed.log 2>&1
  # RLlib DreamerV3, the same model, sequences and ratio (RLlib takes one
  # update per env step at any training_ratio up to 16 x 32 = 512), one
  # torch thread (two ran 14x slower beside the other runs).
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "$PY" ../../rllib_side.py cartpole rllib-seed$seed.jsonl --seed $seed \
    --budget 20000 --hours 1.5 > rllib-seed$seed.log 2>&1
done
