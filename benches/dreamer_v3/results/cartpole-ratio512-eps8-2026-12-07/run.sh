#!/usr/bin/env bash
# 2026-12-07: an ablation of ../cartpole-ratio512-fixes-2026-12-07/: the
# same build but for Adam's epsilon, 1e-8 for the actor and the critic as
# before the change (RLX=/tmp/rlx-eps8), seeds 2 and 3 side by side, to
# tell whether that epsilon or the other changes moved CartPole's seeds.
# Stopped (killed) at 5,000 env steps once the other ablation had answered.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RATIO=512 BUDGET=10000 SIDES=dreamerv3 JOBS=2 bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" cartpole "2 3"
