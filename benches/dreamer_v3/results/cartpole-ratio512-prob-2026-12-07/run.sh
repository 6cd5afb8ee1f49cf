#!/usr/bin/env bash
# 2026-12-07: an ablation of ../cartpole-ratio512-fixes-2026-12-07/: the
# same build but for the imagined continue flags, the head's probability
# (a constant) rather than its mode (RLX=/tmp/rlx-prob), seeds 2 and 3 side
# by side (beside ../cartpole-ratio512-eps8-2026-12-07/), to tell whether
# the mode or the other changes moved CartPole's seeds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RATIO=512 BUDGET=10000 SIDES=dreamerv3 JOBS=2 bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" cartpole "2 3"
