#!/bin/bash
# DreamerV3 on MinAtar Breakout's pixels (conv encoder and decoder), micro model,
# 16 x 32 sequences, training_ratio 64 (one update per 8 env steps), 100k env
# steps or 80 minutes, greedy evaluation of 10 episodes every 10k steps. Seed 1.
timeout 4800 rlx train --run DreamerV3 --env MinAtar/Breakout-v1 --seed 1 \
  --config '{"model_size": "micro", "batch_size_B": 16, "batch_length_T": 32, "training_ratio": 64, "learning_starts": 1024, "timesteps_per_iteration": 5000, "evaluation_interval": 2, "evaluation_duration": 10}' \
  --stop '{"timesteps_total": 100000}' --results-dir OUT
