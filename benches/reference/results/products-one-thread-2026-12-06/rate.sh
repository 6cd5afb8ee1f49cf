#!/usr/bin/env bash
# rate.sh RLX WORKLOAD: one run of a learning workload through the release
# binary; prints the rows trained per second over its training iterations
# (after the first iteration that trained) and the whole process's seconds.
# Needs RLX_PYTHON with gymnasium[mujoco] for the HalfCheetah workloads and
# benches/offline/results/halfcheetah-2026-12-06/data for BC, IQL and CQL.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rlx=$1
data=benches/offline/results/halfcheetah-2026-12-06/data
rows=35000  # the dataset's rows: IQL's and CQL's learning_starts
net='"model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}'
minatar='"model": {"conv_filters": [[16, 3, 1]], "fcnet_hiddens": [128], "fcnet_activation": "relu"}'
case $2 in
  bc-cheetah) a=(--run BC --env gym:HalfCheetah-v5 --stop '{"training_iteration": 3000}'
    --config "{\"input\": \"$data\", \"train_batch_size\": 256, \"lr\": 0.001, $net}") ;;
  iql-cheetah) a=(--run IQL --env gym:HalfCheetah-v5 --stop "{\"timesteps_total\": $((rows + 2000))}"
    --config "{\"input\": \"$data\", \"learning_starts\": $rows, \"timesteps_per_iteration\": 500, $net}") ;;
  cql-cheetah) a=(--run SAC --env gym:HalfCheetah-v5 --stop "{\"timesteps_total\": $((rows + 200))}"
    --config "{\"input\": \"$data\", \"min_q_weight\": 5.0, \"random_timesteps\": 0, \"learning_starts\": $rows, \"actor_lr\": 0.0003, \"critic_lr\": 0.0003, \"alpha_lr\": 0.0003, \"timesteps_per_iteration\": 50, $net}") ;;
  sac-pendulum) a=(-f tuned_examples/sac-pendulum.yaml --stop '{"timesteps_total": 4000}') ;;
  sac-cheetah) a=(-f tuned_examples/sac-halfcheetah.yaml --stop '{"timesteps_total": 11500}' --config '{"timesteps_per_iteration": 250}') ;;
  ppo-minatar) a=(--run PPO --env MinAtar/Breakout-v1 --stop '{"timesteps_total": 40000}'
    --config "{\"num_workers\": 0, \"num_envs_per_worker\": 8, \"train_batch_size\": 4000, \"sgd_minibatch_size\": 256, \"num_sgd_iter\": 4, $minatar}") ;;
  dqn-minatar) a=(--run DQN --env MinAtar/Breakout-v1 --stop '{"timesteps_total": 9000}'
    --config "{\"num_workers\": 0, \"rollout_fragment_length\": 1, \"n_step\": 1, \"learning_starts\": 5000, \"train_batch_size\": 32, \"training_intensity\": 32, \"timesteps_per_iteration\": 1000, $minatar}") ;;
  dreamer-cartpole) a=(-f tuned_examples/dreamerv3-cartpole.yaml --stop '{"timesteps_total": 1500}' --config '{"timesteps_per_iteration": 100}') ;;
  *) echo "unknown workload $2" >&2; exit 2 ;;
esac
work=$(mktemp -d)
start=$(date +%s.%N)
"$rlx" train "${a[@]}" --seed 1 --results-dir "$work" > "$work.log" 2>&1 || { tail -3 "$work.log" >&2; exit 1; }
end=$(date +%s.%N)
python3 - "$work"/*/result.json "$start" "$end" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
trained = [l for l in lines if l.get("num_env_steps_trained", 0) > 0]
first, last = trained[0], trained[-1]
rate = (last["num_env_steps_trained"] - first["num_env_steps_trained"]) / (last["time_total_s"] - first["time_total_s"])
print(f"{rate:.0f} {float(sys.argv[3]) - float(sys.argv[2]):.1f}")
PY
rm -rf "$work" "$work.log"
