#!/usr/bin/env bash
# DQN on the five MinAtar games with the MinAtar paper's settings (Young &
# Tian 2019, "MinAtar: An Atari-Inspired Testbed...", their DQN: one conv
# layer of 16 3x3 filters, a 128-unit layer, replay of 100k, minibatches of
# 32 every frame, target copies every 1,000 frames, epsilon 1 -> 0.1 over
# the first 100k frames, learning from frame 5,000, gamma 0.99, no double
# Q, dueling, n-step or prioritized replay). Adam replaces their RMSProp.
#
# usage: benches/minatar/run.sh OUT_DIR FRAMES [SEEDS...]
#   FRAMES  env frames per run (the paper: 5,000,000)
#   SEEDS   default 1 2 3
#   GAMES=...         the games to run (default all five, in this order)
#   TIME_LIMIT_S=...  the wall time a run stops after (default 9000)
# On the 2-core development VM (2026-12-02, after the binaries stopped
# unmapping freed tensors and MinAtar's observations became bytes),
# SpaceInvaders ran 5,000 frames with an update each in 11.6, 11.6 and
# 10.9 s: about 440 frames/s once learning starts (160 before). The
# paper's 5M frames would take about 3.2 hours a run there; 2.5 hours
# reach about 3.9M (78 %).
# Writes OUT_DIR/<game>-seed<k>/ (rlx's result.json and progress.csv) and
# OUT_DIR/summary.json (each run's frames, seconds and last mean return). A
# run stops at FRAMES or after TIME_LIMIT_S.
set -euo pipefail
out=${1:?OUT_DIR}; frames=${2:?FRAMES}; shift 2
seeds=("${@:-1 2 3}"); [ $# -eq 0 ] && seeds=(1 2 3)
rlx=${RLX:-target/release/rlx}
games=${GAMES:-Asterix Breakout Freeway Seaquest SpaceInvaders}
time_limit_s=${TIME_LIMIT_S:-9000}
mkdir -p "$out"
config='{"num_workers": 0, "num_envs_per_worker": 1, "rollout_fragment_length": 1,
  "buffer_size": 100000, "learning_starts": 5000, "train_batch_size": 32, "training_intensity": 32,
  "target_update_interval": 1000, "n_step": 1, "double_q": false, "dueling": false,
  "prioritized_replay": false, "lr": 0.00025, "gamma": 0.99,
  "exploration_initial_eps": 1.0, "exploration_final_eps": 0.1, "exploration_timesteps": 100000,
  "timesteps_per_iteration": 10000,
  "model": {"conv_filters": [[16, 3, 1]], "fcnet_hiddens": [128], "fcnet_activation": "relu"}}'
for game in $games; do
  for seed in "${seeds[@]}"; do
    dir="$out/$game-seed$seed"
    rm -rf "$dir"
    "$rlx" train --run DQN --env "MinAtar/$game-v1" --seed "$seed" --config "$config" \
      --stop "{\"timesteps_total\": $frames, \"time_total_s\": $time_limit_s}" --results-dir "$dir" \
      > "$dir.log" 2>&1 || { echo "$game seed $seed failed: see $dir.log" >&2; exit 1; }
  done
done
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
runs = {}
for path in sorted(glob.glob(f"{out}/*-seed*/*/result.json")):
    run = path.split("/")[-3]
    last = None
    for line in open(path):
        last = json.loads(line)
    runs[run] = {"frames": last["timesteps_total"], "seconds": last["time_total_s"],
                 "return_mean_100": last.get("episode_reward_mean")}
json.dump(runs, open(f"{out}/summary.json", "w"), indent=1)
print(json.dumps(runs, indent=1))
PY
