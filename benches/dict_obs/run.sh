#!/usr/bin/env bash
# PPO on DictCue-v0 (a 5x5 uint8 image and a +-1 flag in one Dict
# observation) with the image entry behind its own convolutions (the
# default, conv_filters null) and flattened (conv_filters []), at PPO's
# defaults otherwise, over seeds: the env steps each needs to a training
# mean of 7.5 (of 8; reading one entry alone earns 4, random play 2).
#
# usage: benches/dict_obs/run.sh OUT_DIR [SEEDS...]   (default seeds 0-4)
# Writes OUT_DIR/<cnn|flat>-seed<k>/ (rlx's result.json and progress.csv)
# and OUT_DIR/summary.json: per variant, each seed's steps and seconds to
# the threshold (null if 100k steps did not reach it) and the median.
set -euo pipefail
out=${1:?OUT_DIR}; shift
seeds=("$@"); [ $# -eq 0 ] && seeds=(0 1 2 3 4)
rlx=${RLX:-target/release/rlx}
mkdir -p "$out"
for variant in cnn flat; do
  filters=null; [ "$variant" = flat ] && filters='[]'
  for seed in "${seeds[@]}"; do
    dir="$out/$variant-seed$seed"
    rm -rf "$dir"
    "$rlx" train --run PPO --env DictCue-v0 --seed "$seed" \
      --config "{\"num_workers\": 0, \"num_envs_per_worker\": 8, \"model\": {\"conv_filters\": $filters}}" \
      --stop '{"episode_reward_mean": 7.5, "timesteps_total": 100000}' --results-dir "$dir" \
      > "$dir.log" 2>&1 || { echo "$variant seed $seed failed: see $dir.log" >&2; exit 1; }
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
summary = {}
for variant in ("cnn", "flat"):
    runs = {}
    for path in sorted(glob.glob(f"{out}/{variant}-seed*/*/result.json")):
        seed = path.split("/")[-3].split("seed")[1]
        reached = None
        for line in open(path):
            r = json.loads(line)
            if (r.get("episode_reward_mean") or 0) >= 7.5:
                reached = {"steps": r["timesteps_total"], "seconds": round(r["time_total_s"], 2)}
                break
        runs[seed] = reached
    steps = [r["steps"] for r in runs.values() if r]
    summary[variant] = {"runs": runs, "median_steps": statistics.median(steps) if len(steps) == len(runs) else None}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
