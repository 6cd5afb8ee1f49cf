#!/usr/bin/env bash
# Atari sampling with a CNN policy, rlx against RLlib's env runners, three
# rounds alternating, nothing else running. rlx adds two evaluator actors
# with 8 copies each (RLlib's best shape, 2 runners x 8 envs) to the
# one-evaluator rows of gym-2026-11-26. From the repository root, after
# `cargo bench -p rlx-benches --bench gym_bridge --no-run`.
set -u
OUT=benches/reference/results/atari-sampling-2026-11-26
PY=$PWD/target/python-bench/bin/python
export RLX_PYTHON=$PY
echo "start $(date -u +%T)"
for round in 1 2 3; do
    cargo bench -p rlx-benches --bench gym_bridge -- ppo_cnn_policy > "$OUT/sampling-rlx-$round.txt" 2>&1
    $PY benches/reference/harness.py --only rllib_sampling --env ALE/Breakout-v5 --seconds 20 \
        --out "$OUT/sampling-rllib-breakout-$round.json" 2>/dev/null
    echo "round $round $(date -u +%T)"
done
echo "end $(date -u +%T)"

# Part 2, right after: Stable-Baselines3's PPO sampling Breakout with its
# CnnPolicy cut to the same network (DummyVecEnv with torch on 1 or 2
# threads, SubprocVecEnv), against rlx's rows again, twice, alternating.
for round in 1 2; do
    $PY benches/scripts/gym_throughput.py --atari-policy --seconds 10 --repeats 3 --out "$OUT/sampling-sb3-breakout-$round.json"
    cargo bench -p rlx-benches --bench gym_bridge -- ppo_cnn_policy > "$OUT/sampling-rlx-sb3-round-$round.txt" 2>&1
    echo "sb3 round $round $(date -u +%T)"
done
