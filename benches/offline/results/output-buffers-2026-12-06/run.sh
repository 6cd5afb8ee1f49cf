#!/usr/bin/env bash
# 2026-12-06: the CPU layers stop zeroing the buffers a product overwrites
# (a layer's output, a convolution's output and its patches' gradient) and
# stop copying an operation's output gradient out of dfdx's store for its
# backward step (it is taken out and put back); a nonlinearity's backward
# step writes over the outputs it kept. Against the build before (OLD, a
# copy of 4952ac6's release binary). A trial, reverted: the speed was the
# same (speed.txt: `rlx` is the trial build, `rlx-old` 4952ac6's); its
# change is kept in trial.diff (apply it to 4952ac6 to rebuild it).
#   1. Same numbers: every result line's returns, losses and learner
#      statistics (times left out) of short seeded runs, old against new,
#      through each changed operation: linear layers with tanh (PPO) and
#      relu (SAC, DQN, BC, IQL, CQL), convolutions (PPO on MinAtar), the
#      softmax rows and the softmax mean (DreamerV3).
#   2. Speed: benches/offline/speed.sh on the HalfCheetah files, BC, IQL
#      and CQL, old and new and d3rlpy (D3RLPY_THREADS, default "1 0":
#      one thread and torch's default), three rounds, alone on the machine.
#
#   OLD=/tmp/rlx-old NEW=target/release/rlx PY=/tmp/d3env/bin/python bash run.sh
#
# (2026-12-06 ran D3RLPY_THREADS=0: torch's default, d3rlpy's best here.)
#
# SKIP_SAME=1 or SKIP_SPEED=1 leaves out a part.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../same.sh
source "$here/../../same.sh"
if [ "${SKIP_SAME:-0}" != 1 ]; then
{
same_ppo_sac_dqn
same PPO-MinAtar-Breakout --run PPO --env MinAtar/Breakout-v1 --seed 1 --stop '{"timesteps_total": 4000}'
same DreamerV3-CartPole -f "$here/../../../../tuned_examples/dreamerv3-cartpole.yaml" --seed 1 --stop '{"timesteps_total": 1200}'
same_bc BC-HalfCheetah 256
same_iql_cql
} 2>&1 | tee "$here/same-numbers.txt"
fi
[ "${SKIP_SPEED:-0}" = 1 ] || speed_ab "$here/speed.txt"
rm -rf "$W"
