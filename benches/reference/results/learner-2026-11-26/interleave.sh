#!/bin/bash
# usage: run3.sh ALGO ENV STOP SEEDS OUTDIR ; runs old, head and new rlx interleaved per seed
algo=$1; env=$2; stop=$3; seeds=$4; out=$5
mkdir -p $out
for s in $seeds; do
  for side in issue old head new; do
    bin=/tmp/rlx-$side; [ $side = new ] && bin=/work/main/target/release/rlx
    d=$out/$side-seed$s; rm -rf $d
    $bin train --run $algo --env $env --seed $s --stop "$stop" --results-dir $d >/dev/null 2>&1
    f=$(ls $d/*/result.json)
    python3 -c "
import json,sys
r=[json.loads(l) for l in open('$f')][-1]
print('$side', $s, r['timesteps_total'], round(r['time_total_s'],2), r['episode_reward_mean'])"
  done
done
