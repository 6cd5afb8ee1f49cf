#!/usr/bin/env bash
# rlx's defaults against RLlib's own examples beyond PPO: DQN on CartPole
# and SAC on Pendulum with the examples' env runners (RLlib's default for
# them: the local runner, 1 env), APPO and IMPALA on CartPole with 2 env
# runners x 8 envs and the learner in the driver (the examples ask for 5 x 16
# and 4 x 16 env runners and IMPALA's for a remote learner, more than this
# 2-core machine has; 2 x 8 was PPO's best here, and IMPALA with 1 runner
# and a remote learner sampled no faster in a short try). Seeds 1-3, each seed's
# sides one after the other. From the repository root, after
# `cargo build --release --bin rlx`.
set -euo pipefail
out=benches/reference/results/learning-rllib-2026-11-26
py=target/python-bench/bin/python
$py benches/reference/learning.py --rlx target/release/rlx --cells dqn-cartpole,sac-pendulum \
  --sides rlx,rllib-default --budget-s 300 --out "$out/off-policy" 2>&1 | tee "$out/off-policy.log"
$py benches/reference/learning.py --rlx target/release/rlx --cells appo-cartpole,impala-cartpole \
  --sides rlx,rllib-2x8 --budget-s 300 --out "$out/async" 2>&1 | tee "$out/async.log"
