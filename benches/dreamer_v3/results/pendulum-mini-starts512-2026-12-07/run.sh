#!/usr/bin/env bash
# 2026-12-07 (fourth sitting): DreamerV3 on Pendulum with the `mini` model
# at training_ratio 512, as the tuned example, but learning from 512 env
# steps (RLlib's rule: one B x T batch of random steps before the first
# update; 16 x 32 here) instead of 1,024, and SAC's defaults beside it,
# both evaluated greedily (10 episodes) every 500 env steps instead of
# 1,000, to a greedy -200 or 6,000 env steps. Release build of f3366ba
# (01a868b is the same behaviour). Per seed: SAC, then DreamerV3; seeds
# one after the other, beside rlx's CQL HalfCheetah run (benches/offline):
# wall times are not speed figures.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
EVERY=500 RATIO=512 CONFIG='"model_size": "mini", "learning_starts": 512' BUDGET=6000 SIDES="SAC dreamerv3" \
    bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" pendulum "${SEEDS:-1 2 3}"
