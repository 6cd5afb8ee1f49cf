#!/usr/bin/env bash
# Products kept on one thread inside an update's two halves, split over
# rayon's threads only from 32M multiply-adds (was 4M), and convolutions
# on the same product (gemm 0.19) as the fully connected layers, against
# the build before (OLD), side by side, alternating, ROUNDS rounds
# (default 3).
#
#   OLD=/tmp/rlx-base RLX_PYTHON=target/python/bin/python bash ab.sh [new rlx] > raw.txt
#
# Each line: workload, side, round, rows trained per second, whole seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
new=$(realpath "${1:-target/release/rlx}")
old=$(realpath "${OLD:?an older rlx binary}")
for round in $(seq 1 "${ROUNDS:-3}"); do
  for w in ${WORKLOADS:-bc-cheetah iql-cheetah cql-cheetah sac-pendulum sac-cheetah ppo-minatar dqn-minatar dreamer-cartpole}; do
    for side in old new; do
      bin=$old; [ $side = new ] && bin=$new
      echo "$w $side $round $(bash "$here/rate.sh" "$bin" "$w")"
    done
  done
done
