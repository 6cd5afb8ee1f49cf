#!/bin/bash
# run.sh RLX OUT: final reward of async algorithms, 3 seeds each
RLX=$1; OUT=$2; mkdir -p $OUT
for alg in A3C IMPALA APPO APEX; do for seed in 1 2 3; do
  d=$(mktemp -d)
  timeout 300 $RLX train --run $alg --env CartPole-v1 --stop '{"timesteps_total": 40000}' --seed $seed --results-dir $d >/dev/null 2>&1
  python3 -c "
import json,glob,sys
rows=[json.loads(l) for l in open(glob.glob('$d/*/result.json')[0])]
r=rows[-1]; print('$alg', $seed, r['timesteps_total'], round(r['episode_reward_mean'],1), len(rows))" >> $OUT/results.txt 2>>$OUT/err.txt
  rm -rf $d
done; done
