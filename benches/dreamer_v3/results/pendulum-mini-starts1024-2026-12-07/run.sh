#!/usr/bin/env bash
# 2026-12-07 (fourth sitting): the control for ../pendulum-mini-starts512-2026-12-07/:
# the same protocol (mini, training_ratio 512, greedy evaluation of 10
# episodes every 500 env steps, to -200 or 6,000 env steps) with the
# example's former learning_starts of 1,024, so that the two differ in
# learning_starts alone. Release build of f3366ba; seeds 1-3 side by side
# (JOBS=3) with rlx's CQL HalfCheetah run paused: wall times are not
# speed figures. Seeds 1 and 2 were stopped (SIGTERM) after their
# evaluation at 4,000 env steps, where every seed of the learning_starts
# 512 runs had reached -200, so that the sitting could end; seed 3 reached
# -200 at 3,000 and stopped itself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
EVERY=500 RATIO=512 CONFIG='"model_size": "mini", "learning_starts": 1024' BUDGET=6000 SIDES=dreamerv3 JOBS=${JOBS:-3} \
    bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" pendulum "${SEEDS:-1 2 3}"
