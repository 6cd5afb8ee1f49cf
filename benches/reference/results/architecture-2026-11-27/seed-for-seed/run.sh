#!/bin/bash
# usage: run.sh RLX OUTDIR  — records seed-for-seed fingerprints of the sync algorithms
RLX=$1; OUT=$2; mkdir -p $OUT
run() { # name algo env stop config
  local d=$(mktemp -d)
  timeout 300 $RLX train --run $2 --env $3 --stop "$4" --config "$5" --seed 1 --results-dir $d >/dev/null 2>$OUT/$1.err
  python3 - "$d" > $OUT/$1.txt <<'PY'
import json,glob,sys
for line in open(glob.glob(sys.argv[1]+'/*/result.json')[0]):
    r=json.loads(line)
    keep={k:r.get(k) for k in ["training_iteration","timesteps_total","episodes_total","episode_reward_mean"]}
    keep["learner"]={k:v for k,v in sorted((r.get("learner") or {}).items()) if not k.endswith("_s") and "time" not in k}
    print(json.dumps(keep,sort_keys=True))
PY
  rm -rf $d
}
run PG PG CartPole-v1 '{"training_iteration":3}' '{}'
run A2C A2C CartPole-v1 '{"training_iteration":3}' '{}'
run PPO PPO CartPole-v1 '{"training_iteration":3}' '{}'
run PPO2 PPO CartPole-v1 '{"training_iteration":3}' '{"num_workers":2}'
run PPOP PPO Pendulum-v1 '{"training_iteration":2}' '{}'
run DQN DQN CartPole-v1 '{"training_iteration":3}' '{}'
run DDPG DDPG Pendulum-v1 '{"training_iteration":3}' '{}'
run TD3 TD3 Pendulum-v1 '{"training_iteration":3}' '{}'
run SAC SAC Pendulum-v1 '{"training_iteration":3}' '{}'
run ES ES CartPole-v1 '{"training_iteration":2}' '{}'
run ARS ARS CartPole-v1 '{"training_iteration":2}' '{}'
run MA PPO MultiAgentCartPole '{"training_iteration":2}' '{"multiagent":{"policies":{"p0":{},"p1":{"run":"DQN"}},"policies_to_train":["p0"],"policy_mapping":{"agent_0":"p0","agent_1":"p1"}}}'
run MA2 PPO MultiAgentCartPole '{"training_iteration":2}' '{"multiagent":{"policies":["p0","p1"],"policy_mapping":{"agent_0":"p0","agent_1":"p1"}}}'
run SP PPO TicTacToe '{"training_iteration":2}' '{}'
run EVAL PPO CartPole-v1 '{"training_iteration":2}' '{"evaluation_interval":1}'
run MAA A2C MultiAgentCartPole '{"training_iteration":2}' '{"multiagent":{"policies":["p0","p1"],"policy_mapping":{"agent_0":"p0","agent_1":"p1"}}}'
run MAD DQN MultiAgentCartPole '{"training_iteration":2}' '{"multiagent":{"policies":["p0","p1"],"policy_mapping":{"agent_0":"p0","agent_1":"p1"}}}'
