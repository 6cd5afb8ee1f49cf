#!/bin/bash
# usage: SIDES="old new" interleave.sh ALGO ENV STOP SEEDS OUTDIR
# Runs each build /tmp/ab/rlx-$side (old = 35a9afb, the learner issue's
# build; new = this change) one after the other for each seed, printing
# side, seed, env steps, seconds, training mean, and env steps trained
# per second (divide by the train batch size, 256, for updates per second).
algo=$1; env=$2; stop=$3; seeds=$4; out=$5
mkdir -p $out
for s in $seeds; do
  for side in ${SIDES:-old new}; do
    d=$out/$side-seed$s; rm -rf $d
    /tmp/ab/rlx-$side train --run $algo --env $env --seed $s --stop "$stop" --results-dir $d >/dev/null 2>&1
    f=$(ls $d/*/result.json)
    python3 -c "
import json
r=[json.loads(l) for l in open('$f')][-1]
print('$side', $s, r['timesteps_total'], round(r['time_total_s'],2), round(r['episode_reward_mean'],1), round(r['num_env_steps_trained']/r['time_total_s']))"
  done
done
