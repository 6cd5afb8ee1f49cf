#!/usr/bin/env bash
# 2026-12-07 (third sitting): DreamerV3 on Pendulum at two updates per env
# step (training_ratio 1024, 16 x 32 sequences) with the code rlx keeps
# since 2026-12-07 (release build of f3366ba; 01a868b is the same
# behaviour), the tuned example otherwise, greedy evaluation of 10 episodes
# every 1,000 env steps, to a greedy -200 or 6,000 env steps. At 512 the
# same code stood at -349, -276 and -169 at 6,000 (seeds 1-3); SAC's
# defaults reach -200 at 4,000, 5,000 and 7,000. Seeds one after the
# other, beside rlx's CQL HalfCheetah runs (benches/offline): wall times
# are not speed figures. Only seed 1 ran (greedy -425.5 at 6,000, behind
# its -349 at 512); the sitting went on with the mini model instead
# (../pendulum-mini-ratio512-2026-12-07/), and summary.tsv was written by
# env_steps.sh's own summary code after the script was stopped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RATIO=1024 CONFIG='"model_size": "micro", "learning_starts": 1024' BUDGET=6000 SIDES=dreamerv3 JOBS=1 bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" pendulum "${SEEDS:-1 2 3}"
