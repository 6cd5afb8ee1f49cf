#!/usr/bin/env bash
# 2026-12-06: BC's minibatch in two halves side by side on the CPU;
# optimizer groups (critics | value, actor) stepped side by side; IQL's
# V(s') on the critics' side of its update; Adam's loop 8 wide; the
# gradient norm over eight running sums; one copy of each gradient out of
# dfdx, none zeroed; result files synced to disk at most once a second
# (were: every iteration); against the build before (OLD, a copy of
# d3309d8's release binary).
#   1. Same numbers where only speed changed: every result line's
#      returns, losses and learner statistics (times left out) of short
#      seeded runs, old against new. BC at 200 rows an update (fewer than
#      the 256 that split) too; BC at 256 rows splits, and its numbers
#      differ in rounding: its runs are compared by their evaluations.
#   2. Speed: benches/offline/speed.sh on the HalfCheetah files, BC, IQL
#      and CQL, old and new and d3rlpy (one thread and torch's default),
#      three rounds, alone on the machine.
#
#   OLD=/tmp/rlx-cql NEW=target/release/rlx PY=/tmp/d3env/bin/python bash run.sh
#
# SKIP_SAME=1 or SKIP_SPEED=1 leaves out a part.
set -euo pipefail
OLD=${OLD:-/tmp/rlx-cql}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../same.sh
source "$here/../../same.sh"
if [ "${SKIP_SAME:-0}" != 1 ]; then
{
same_ppo_sac_dqn
same_bc BC-HalfCheetah-200-rows 200
same TD3-HalfCheetah --run TD3 --env gym:HalfCheetah-v5 --seed 1 --stop '{"timesteps_total": 400}' \
  --config "{\"input\": \"$DATA\", \"learning_starts\": 0, \"timesteps_per_iteration\": 100, $NET}"
same_iql_cql
} 2>&1 | tee "$here/same-numbers.txt"
fi
[ "${SKIP_SPEED:-0}" = 1 ] || speed_ab "$here/speed.txt"
rm -rf "$W"
