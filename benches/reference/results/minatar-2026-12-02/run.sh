#!/usr/bin/env bash
cd /work/main
config='{"num_workers": 0, "num_envs_per_worker": 1, "rollout_fragment_length": 1,
  "buffer_size": 100000, "learning_starts": 5000, "train_batch_size": 32, "training_intensity": 32,
  "target_update_interval": 1000, "n_step": 1, "double_q": false, "dueling": false,
  "prioritized_replay": false, "lr": 0.00025, "gamma": 0.99,
  "exploration_initial_eps": 1.0, "exploration_final_eps": 0.1, "exploration_timesteps": 100000,
  "timesteps_per_iteration": 10000,
  "model": {"conv_filters": [[16, 3, 1]], "fcnet_hiddens": [128], "fcnet_activation": "relu"}}'
cp target/release/rlx /tmp/minatar/rlx
exec nice -n 10 /tmp/minatar/rlx train --run DQN --env MinAtar/Breakout-v1 --seed 1 --config "$config" \
  --stop '{"timesteps_total": 5000000, "time_total_s": 7200}' --results-dir /tmp/minatar/Breakout-seed1
