#!/usr/bin/env bash
# Env steps to a greedy criterion: DreamerV3's tuned example against an
# rlx baseline with its defaults, seeds one after the other, both sides
# evaluated greedily (10 episodes) every 1,000 env steps (EVERY sets it).
#
#   bash benches/dreamer_v3/env_steps.sh RLX OUT_DIR pendulum|cartpole [SEEDS]
#
# pendulum: tuned_examples/dreamerv3-pendulum.yaml against SAC's defaults,
# to a greedy −200 (at most 20,000 env steps); cartpole:
# tuned_examples/dreamerv3-cartpole.yaml against PPO's defaults, to a
# greedy 475 (at most 30,000). SEEDS defaults to "1 2 3". Each run writes
# OUT_DIR/<side>-seed<N>/ (result.json, params.json) and its log; the
# summary (env steps and wall seconds to the criterion, per run) goes to
# OUT_DIR/summary.tsv. Nothing else should run on the machine: the wall
# times are only comparable between runs of one session.
#
# RATIO sets DreamerV3's training_ratio (default: the example's), CONFIG
# more keys for DreamerV3's --config (e.g. '"model_size": "mini"'), BUDGET
# the env steps a run may take (default above), SIDES which runs to make
# (default "dreamerv3 <baseline>"), and JOBS how many seeds run side by
# side (default 1; a DreamerV3 run keeps one core busy). EVERY sets the
# env steps between greedy evaluations on both sides (default 1000; PPO
# still evaluates once per train batch).
set -euo pipefail
rlx=$1 out=$2 task=$3 seeds=${4:-1 2 3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../scripts/live_run.sh"
case "$task" in
    pendulum) example=dreamerv3-pendulum.yaml baseline=SAC env=Pendulum-v1 goal=-200 budget=20000 ;;
    cartpole) example=dreamerv3-cartpole.yaml baseline=PPO env=CartPole-v1 goal=475 budget=30000 ;;
    *) echo "task: pendulum or cartpole, not $task" >&2; exit 2 ;;
esac
budget=${BUDGET:-$budget}
stop="{\"evaluation/episode_reward_mean\": $goal, \"timesteps_total\": $budget}"
every='"evaluation_interval": 1, "evaluation_duration": 10'
iter_steps=${EVERY:-1000}
more=""
[ -n "${RATIO:-}" ] && more=", \"training_ratio\": $RATIO"
[ -n "${CONFIG:-}" ] && more="$more, $CONFIG"
mkdir -p "$out"
run_seed() {
    local seed=$1 side dir extra
    for side in ${SIDES:-dreamerv3 $baseline}; do
        dir="$out/$side-seed$seed"
        if live_run "$dir"; then
            echo "$dir: a run is still writing there; not starting $side seed $seed again" >&2
            continue
        fi
        rm -rf "$dir"
        if [ "$side" = dreamerv3 ]; then
            "$rlx" train -f "$here/../../tuned_examples/$example" --seed "$seed" --stop "$stop" \
                --config "{$every, \"timesteps_per_iteration\": $iter_steps$more}" --results-dir "$dir" > "$dir.log" 2>&1
        else
            # PPO's iterations are its train batches (1,024 steps by
            # default); SAC's are timesteps_per_iteration.
            extra=""
            [ "$side" = SAC ] && extra=", \"timesteps_per_iteration\": $iter_steps"
            "$rlx" train --run "$side" --env "$env" --seed "$seed" --stop "$stop" \
                --config "{$every$extra}" --results-dir "$dir" > "$dir.log" 2>&1
        fi
    done
}
running=0
for seed in $seeds; do
    run_seed "$seed" &
    running=$((running + 1))
    if [ "$running" -ge "${JOBS:-1}" ]; then
        wait
        running=0
    fi
done
wait
python3 - "$out" "$goal" > "$out/summary.tsv" <<'PY'
import glob, json, os, sys
out, goal = sys.argv[1], float(sys.argv[2])
print("run\tenv_steps_to_goal\tseconds_to_goal\tlast_env_steps\tbest_greedy")
for run in sorted(glob.glob(f"{out}/*-seed*/*/result.json")):
    lines = [json.loads(l) for l in open(run)]
    evals = [l for l in lines if "evaluation" in l]
    hit = next((l for l in evals if l["evaluation"]["episode_reward_mean"] >= goal), None)
    best = max((l["evaluation"]["episode_reward_mean"] for l in evals), default=float("nan"))
    name = os.path.basename(os.path.dirname(os.path.dirname(run)))
    steps, secs = (hit["timesteps_total"], round(hit["time_total_s"], 1)) if hit else ("-", "-")
    print(f"{name}\t{steps}\t{secs}\t{lines[-1]['timesteps_total']}\t{best:.1f}")
PY
cat "$out/summary.tsv"
