#!/usr/bin/env bash
# 2026-12-06: RLlib 2.60's DreamerV3 (torch 2.15, CPU, one torch thread)
# beside rlx's on the same settings (micro, 16 x 32, one update per env
# step: RLlib asked for 256 makes one per env step), RLlib's greedy
# evaluation of 10 episodes every 1,000 env steps. CartPole seeds 2 and 3
# (seed 1 is in ../cartpole-ratio512-2026-12-05/), then Pendulum seed 1.
# Budgets are what two shared cores allow in one session: 8,000 env steps
# or 45 minutes on CartPole (rlx: 4,000 on two seeds of three), 6,000 or
# 40 minutes on Pendulum.
set -euo pipefail
PY=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
for seed in 2 3; do
  "$PY" ../../rllib_side.py cartpole cartpole-seed$seed.jsonl --seed $seed \
    --budget 8000 --hours 0.75 > cartpole-seed$seed.log 2>&1 || true
done
"$PY" ../../rllib_side.py pendulum pendulum-seed1.jsonl --seed 1 \
  --budget 6000 --hours 0.67 > pendulum-seed1.log 2>&1 || true
# Then Pendulum seeds 2 and 3 side by side, one per core, to 6,000 env
# steps or 27 minutes (what the session had left).
for seed in 2 3; do
  "$PY" ../../rllib_side.py pendulum pendulum-seed$seed.jsonl --seed $seed \
    --budget 6000 --hours 0.45 > pendulum-seed$seed.log 2>&1 &
done
wait
