#!/usr/bin/env bash
# 2026-12-07: DreamerV3 on CartPole after the imagination was brought to
# the paper's code (continue flags as the head's mode, a window starting
# inside an episode keeps its first reward; the other changes of that
# commit touch continuous actions only), with the settings of
# ../cartpole-ratio512-2026-12-05/ (the tuned example at training_ratio
# 512, greedy evaluation of 10 episodes every 1,000 env steps, to a
# greedy 475), but to 10,000 env steps: the earlier build reached 475 at
# 4,000, 4,000 and 6,000 on seeds 1-3 (seed 3 on 2026-12-06), PPO at
# 14,336, 3,072 and 4,096.
# Seed 1 ran alone (beside Pendulum's seed 3), then seeds 2 and 3 side by
# side, with RLX=/tmp/rlx-dreamer (a release build of the change):
#
#   RATIO=512 BUDGET=10000 SIDES=dreamerv3 bash ../../env_steps.sh RLX OUT cartpole 1
#   RATIO=512 BUDGET=10000 SIDES=dreamerv3 JOBS=2 bash ../../env_steps.sh RLX OUT cartpole "2 3"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RATIO=512 BUDGET=10000 SIDES=dreamerv3 JOBS=2 bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" cartpole
