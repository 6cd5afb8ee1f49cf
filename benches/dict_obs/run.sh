#!/usr/bin/env bash
# PPO on DictCue-v0 (a side x side uint8 image and a +-1 flag in one Dict
# observation) with the image entry behind its own convolutions (the
# default, conv_filters null) and flattened (conv_filters []), at PPO's
# defaults otherwise, over seeds: the env steps each needs to a training
# mean of 7.5 (of 8; reading one entry alone earns 4, random play 2).
#
# usage: benches/dict_obs/run.sh OUT_DIR [SEEDS...]   (default seeds 0-4)
#   SIDES=...  image sides (default "5 15")
#   BUDGET=... env steps a run stops after (default 300000)
# Writes OUT_DIR/side<s>-<cnn|flat>-seed<k>/ (rlx's result.json and
# progress.csv) and OUT_DIR/summary.json: per side and variant, each
# seed's steps and seconds to the threshold (null if the budget did not
# reach it) and the median.
set -euo pipefail
out=${1:?OUT_DIR}; shift
seeds=("$@"); [ $# -eq 0 ] && seeds=(0 1 2 3 4)
rlx=${RLX:-target/release/rlx}
sides=${SIDES:-5 15}
budget=${BUDGET:-300000}
mkdir -p "$out"
for side in $sides; do
  for variant in cnn flat; do
    filters=null; [ "$variant" = flat ] && filters='[]'
    for seed in "${seeds[@]}"; do
      dir="$out/side$side-$variant-seed$seed"
      rm -rf "$dir"
      config="{\"num_workers\": 0, \"num_envs_per_worker\": 8, \"env_config\": {\"side\": $side},
        \"model\": {\"conv_filters\": $filters}}"
      "$rlx" train --run PPO --env DictCue-v0 --seed "$seed" --config "$config" \
        --stop "{\"episode_reward_mean\": 7.5, \"timesteps_total\": $budget}" --results-dir "$dir" \
        > "$dir.log" 2>&1 || { echo "side $side $variant seed $seed failed: see $dir.log" >&2; exit 1; }
    done
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
summary = {}
sides = sorted({p.split("/")[-3].split("-")[0] for p in glob.glob(f"{out}/side*-*-seed*/*/result.json")})
for side, variant in [(s, v) for s in sides for v in ("cnn", "flat")]:
    runs = {}
    for path in sorted(glob.glob(f"{out}/{side}-{variant}-seed*/*/result.json")):
        seed = path.split("/")[-3].split("seed")[1]
        reached = None
        for line in open(path):
            r = json.loads(line)
            if (r.get("episode_reward_mean") or 0) >= 7.5:
                reached = {"steps": r["timesteps_total"], "seconds": round(r["time_total_s"], 2)}
                break
        runs[seed] = reached
    steps = [r["steps"] for r in runs.values() if r]
    summary[f"{side}-{variant}"] = {"runs": runs, "median_steps": statistics.median(steps) if len(steps) == len(runs) else None}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
