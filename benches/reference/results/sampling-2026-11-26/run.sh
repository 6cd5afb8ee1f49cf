#!/usr/bin/env bash
# Sampling side by side after the host acting path: rlx-compare's sampling
# rows (2x64 tanh PPO policy, 0/1/2 evaluators x 8 envs, CartPole-v1) and
# RLlib 2.60's env runners (0/1/2 runners x 8 envs), seeds 1-3, each
# seed's rlx run and RLlib run one after the other, nothing else running.
# The solve rows are cut to one env step (--budget-steps 1): this run is
# for sampling only. From the repository root, after
#   cargo build --release -p rlx-benches --bin rlx-compare
set -euo pipefail
out=benches/reference/results/sampling-2026-11-26
PY=${PY:-target/python-bench/bin/python}
for seed in 1 2 3; do
  target/release/rlx-compare measure --seed "$seed" --seconds 10 --budget-steps 1 --out "$out/rlx-$seed.json"
  "$PY" benches/reference/harness.py --only rllib_sampling --seed "$seed" --seconds 10 --out "$out/reference-$seed.json"
done
