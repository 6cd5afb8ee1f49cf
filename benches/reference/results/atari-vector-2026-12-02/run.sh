#!/usr/bin/env bash
# Breakout on rlx's Gymnasium bridge with ale-py's C++ vector env (the
# default for ALE/ ids since 2026-12-02) against one Gymnasium env per
# copy, beside raw C++ vector stepping (ale-py's and EnvPool's own loops)
# and Stable-Baselines3's PPO sampling, three rounds alternating, nothing
# else running. From the repository root, after
# `cargo bench -p rlx-benches --bench gym_bridge --no-run`, with a venv
# target/python-bench holding envs/python/requirements.txt, envpool and
# stable-baselines3.
set -u
OUT=benches/reference/results/atari-vector-2026-12-02
PY=$PWD/target/python-bench/bin/python
export RLX_PYTHON=$PY
echo "start $(date -u +%T)"
for round in 1 2 3; do
    cargo bench -p rlx-benches --bench gym_bridge -- Breakout > "$OUT/rlx-$round.txt" 2>&1
    $PY benches/scripts/gym_throughput.py --atari-raw --seconds 5 --repeats 3 --out "$OUT/raw-$round.json"
    $PY benches/scripts/gym_throughput.py --atari-policy --seconds 10 --repeats 3 --out "$OUT/sb3-$round.json"
    echo "round $round $(date -u +%T)"
done
echo "end $(date -u +%T)"
