#!/bin/bash
# SAC with 256x256 networks on Pendulum-v1 (the zoo's settings), 3,000 env
# steps, updates per second: this build (target/release/rlx) and
# Stable-Baselines3 2.9.2 (target/python-bench), one after the other per
# seed. (The learner issue's build, 35a9afb, has no `model` key for SAC, so
# it cannot run these networks.) rlx columns: side,
# seed, env steps, seconds, updates (num_env_steps_trained / 256), updates
# per second. Run from the repository root.
cfg='{"model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}, "actor_lr": 0.001, "critic_lr": 0.001, "alpha_lr": 0.001, "initial_alpha": 1.0, "learning_starts": 100, "random_timesteps": 100, "train_batch_size": 256}'
out=${OUT:-/tmp/sac-256x256}
mkdir -p $out
for s in 1 2 3; do
  for side in new; do
    bin=target/release/rlx
    d=$out/$side-seed$s; rm -rf $d
    $bin train --run SAC --env Pendulum-v1 --seed $s --config "$cfg" --stop '{"timesteps_total": 3000}' --results-dir $d >/dev/null 2>&1
    f=$(ls $d/*/result.json)
    python3 -c "
import json
r=[json.loads(l) for l in open('$f')][-1]
u=r['num_env_steps_trained']/256
print('$side', $s, r['timesteps_total'], round(r['time_total_s'],2), round(u), round(u/r['time_total_s'],1))"
  done
  target/python-bench/bin/python benches/reference/results/sac-256x256-2026-11-26/sb3_sac.py $s 3000
done
