#!/usr/bin/env bash
# The CPU's fused softmax ops against dfdx's, same session, alternating:
# DreamerV3's update cost on Pendulum (the tuned example, seed 1, stopped
# at the first iteration past 1,600 env steps, i.e. 2,000: 488 updates
# after learning_starts) and on CartPole (the tuned example at
# training_ratio 512, seed 1, 2,000 env steps: 976 updates). The learner's
# seconds are the last iteration's means per update.
#   [ROUNDS="1 2"] bash ab.sh OLD_RLX NEW_RLX OUT_DIR
set -euo pipefail
old=$1 new=$2 out=$3
mkdir -p "$out"
for round in ${ROUNDS:-1 2}; do
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    for task in pendulum cartpole; do
      dir="$out/$task-$side-$round"; rm -rf "$dir"
      if [ $task = pendulum ]; then
        stop='{"timesteps_total": 1600}'; extra=', "training_ratio": 256, "model_size": "micro", "learning_starts": 1024'
      else
        stop='{"timesteps_total": 2000}'; extra=', "training_ratio": 512'
      fi
      /usr/bin/time -f "%e s wall %U user %M KB" "$bin" train -f "$(dirname "$0")/../../../../tuned_examples/dreamerv3-$task.yaml" --seed 1 \
        --stop "$stop" --config "{\"evaluation_interval\": 100$extra}" --results-dir "$dir" > "$dir.log" 2>&1
      python3 - "$dir" "$task-$side-$round" "$(tail -1 "$dir.log")" <<'PY'
import glob, json, sys
d, name, t = sys.argv[1:]
rows = [json.loads(l) for l in open(glob.glob(f"{d}/*/result.json")[0])]
L = rows[-1]["learner"]
print(f"{name}\t{t}\tworld_model_s {L['world_model_s']:.4f}\timagination_s {L['imagination_s']:.4f}\tbehaviour_s {L['behaviour_s']:.4f}\treturn {rows[-1]['episode_reward_mean']:.1f}")
PY
    done
  done
done
