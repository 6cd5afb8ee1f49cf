#!/usr/bin/env bash
# The side-by-side runs of 2026-11-26 for the book's Gymnasium page: Atari
# sampling (rlx's bridge against RLlib's env runners), IMPALA on Breakout
# (rlx against RLlib), PPO and SAC on HalfCheetah-v5 (rlx against SB3 with
# the zoo's settings). One after the other, rlx and the reference
# interleaved per seed, nothing else running. From the repository root,
# after `cargo build --release --bin rlx` and
# `cargo bench -p rlx-benches --bench gym_bridge --no-run`.
set -u
OUT=benches/reference/results/gym-2026-11-26
PY=$PWD/target/python-bench/bin/python
export RLX_PYTHON=$PY
H="$PY benches/reference/harness.py"
RUNS=/tmp/gym-runs
rm -rf $RUNS && mkdir -p $RUNS

rlx_run() { # name seed yaml [more rlx train arguments]
    local name=$1 seed=$2 yaml=$3
    shift 3
    local dir=$RUNS/$name-$seed
    timeout 900 target/release/rlx train -f "$yaml" --seed "$seed" --results-dir "$dir" "$@" > "$OUT/$name-rlx-$seed.log" 2>&1
    cp "$(find "$dir" -name progress.csv | head -1)" "$OUT/$name-rlx-$seed.csv"
}

echo "start $(date -u +%T)"
# 1. Atari sampling with a CNN policy, twice each side.
for round in 1 2; do
    cargo bench -p rlx-benches --bench gym_bridge -- gym_bridge_sampling > "$OUT/sampling-rlx-$round.txt" 2>&1
    $H --only rllib_sampling --env ALE/Breakout-v5 --seconds 20 --out "$OUT/sampling-rllib-breakout-$round.json" 2>/dev/null
    echo "sampling round $round $(date -u +%T)"
done
# 2. IMPALA on Breakout, 180 s each, the same network on both sides.
for seed in 1 2 3; do
    rlx_run impala-breakout $seed tuned_examples/impala-breakout.yaml --stop '{"time_total_s": 180}' \
        --config '{"model": {"fcnet_hiddens": [256], "vf_share_layers": true}}'
    $H --only rllib_impala_atari --env ALE/Breakout-v5 --runners 1 --envs 8 --learners 1 --seed $seed \
        --budget-s 180 --out "$OUT/impala-breakout-rllib-$seed.json" 2>/dev/null
    echo "impala seed $seed $(date -u +%T)"
done
$H --only rllib_impala_atari --env ALE/Breakout-v5 --runners 1 --envs 8 --learners 0 --seed 1 \
    --budget-s 180 --out "$OUT/impala-breakout-rllib-0-learners-1.json" 2>/dev/null
# 3. SAC on HalfCheetah, 240 s each.
for seed in 1 2 3; do
    rlx_run sac-halfcheetah $seed tuned_examples/sac-halfcheetah.yaml
    $H --only sb3_halfcheetah --algo sac --seed $seed --budget-s 240 --out "$OUT/sac-halfcheetah-sb3-$seed.json" 2>/dev/null
    echo "sac seed $seed $(date -u +%T)"
done
# 4. PPO on HalfCheetah, 180 s each.
for seed in 1 2 3; do
    rlx_run ppo-halfcheetah $seed tuned_examples/ppo-halfcheetah.yaml
    $H --only sb3_halfcheetah --algo ppo --seed $seed --budget-s 180 --out "$OUT/ppo-halfcheetah-sb3-$seed.json" 2>/dev/null
    echo "ppo seed $seed $(date -u +%T)"
done
echo "end $(date -u +%T)"
