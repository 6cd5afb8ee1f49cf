#!/usr/bin/env bash
# The tuned examples with the zoo's settings that were missing (A2C on
# CartPole, SAC and TD3 on Pendulum) and A2C on Acrobot again with RMSprop,
# beside SB3 with the same settings and rlx's defaults, seeds 1-3, each
# seed's sides one after the other. From the repository root, after
# `cargo build --release --bin rlx`.
set -euo pipefail
out=benches/reference/results/learning-zoo-tuned-2026-11-26
target/python-bench/bin/python benches/reference/learning.py --rlx target/release/rlx \
  --cells a2c-cartpole,a2c-acrobot,sac-pendulum,td3-pendulum \
  --sides rlx,rlx-tuned,sb3 --budget-s 240 --out "$out" 2>&1 | tee "$out/log.txt"
