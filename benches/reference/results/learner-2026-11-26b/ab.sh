#!/usr/bin/env bash
# Before/after the CPU convolution and bias add (2026-11-26), one after the
# other on the 2-core machine, nothing else running. "old" is the release
# build of 29ee13e, "new" the change; binaries copied aside before the
# rebuild. From the repository root.
set -u
OUT=benches/reference/results/learner-2026-11-26b
export RLX_PYTHON=$PWD/target/python-bench/bin/python
NEW_MODELS=$(ls -t target/release/deps/models-* | grep -v '\.d$' | head -1)
NEW_GYM=$(ls -t target/release/deps/gym_bridge-* | grep -v '\.d$' | head -1)
FILTER='models/(learner/update/(ppo_breakout_cnn_256|dqn_breakout_cnn_64|sac_pendulum_256|ppo_cartpole_mlp_256|ppo_pendulum_gaussian_256)|sampling/8_envs/breakout_cnn)'
for round in 1 2; do
    /tmp/models-old --bench "$FILTER" > $OUT/models-old-$round.txt 2>&1
    $NEW_MODELS --bench "$FILTER" > $OUT/models-new-$round.txt 2>&1
    /tmp/gym_bridge-old --bench gym_bridge_sampling/ppo_cnn > $OUT/gym-sampling-old-$round.txt 2>&1
    $NEW_GYM --bench gym_bridge_sampling/ppo_cnn > $OUT/gym-sampling-new-$round.txt 2>&1
    echo "round $round $(date -u +%T)"
done
# SAC on HalfCheetah (2x256 networks, 256 rows): 90 s each, env steps per
# second after the 10,000 random steps.
for b in old new; do
    bin=target/release/rlx; [ $b = old ] && bin=/tmp/rlx-pre-conv
    rm -rf /tmp/ab-sac-$b
    $bin train -f tuned_examples/sac-halfcheetah.yaml --stop '{"time_total_s": 90}' --results-dir /tmp/ab-sac-$b > $OUT/sac-halfcheetah-$b.log 2>&1
    cp "$(find /tmp/ab-sac-$b -name progress.csv | head -1)" $OUT/sac-halfcheetah-$b.csv
done
echo "end $(date -u +%T)"
