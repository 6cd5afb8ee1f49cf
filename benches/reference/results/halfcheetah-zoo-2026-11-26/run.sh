#!/usr/bin/env bash
# PPO on HalfCheetah-v5 with rl-baselines3-zoo's settings on both sides:
# rlx through tuned_examples/ppo-halfcheetah-zoo.yaml (the zoo's keys, with
# log_std_init and normalize_rewards), SB3 through harness.py's
# sb3_halfcheetah (the same settings), 180 s each, seeds 1-3, interleaved,
# nothing else running. From the repository root, after
# `cargo build --release --bin rlx`.
set -u
OUT=benches/reference/results/halfcheetah-zoo-2026-11-26
PY=$PWD/target/python-bench/bin/python
export RLX_PYTHON=$PY
RUNS=/tmp/halfcheetah-zoo-runs
rm -rf $RUNS && mkdir -p $RUNS
echo "start $(date -u +%T)"
for seed in 1 2 3; do
    dir=$RUNS/rlx-$seed
    timeout 900 target/release/rlx train -f tuned_examples/ppo-halfcheetah-zoo.yaml --seed $seed --results-dir $dir \
        > $OUT/ppo-zoo-rlx-$seed.log 2>&1
    cp "$(find $dir -name progress.csv | head -1)" $OUT/ppo-zoo-rlx-$seed.csv
    $PY benches/reference/harness.py --only sb3_halfcheetah --algo ppo --seed $seed --budget-s 180 \
        --out $OUT/ppo-zoo-sb3-$seed.json 2>/dev/null
    echo "seed $seed $(date -u +%T)"
done
rm -f MUJOCO_LOG.TXT
echo "end $(date -u +%T)"
