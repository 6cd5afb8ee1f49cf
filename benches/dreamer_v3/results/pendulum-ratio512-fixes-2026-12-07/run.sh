#!/usr/bin/env bash
# 2026-12-07: DreamerV3 on Pendulum after the imagination was brought to
# the paper's code (the actor sees imagined states as constants, an action
# beyond the box is scaled onto it rather than clipped, continue flags are
# the head's mode, the continuous actor's advantage has the critic's
# baseline, Adam's epsilon 1e-5 for actor and critic, a window starting
# inside an episode keeps its first reward). The settings of
# ../pendulum-ratio512-2026-12-06/ (the tuned example at training_ratio
# 512, one update per env step; greedy evaluation of 10 episodes every
# 1,000 env steps, to a greedy -200 or 6,000 env steps), where no seed
# reached -200 by 6,000 and SAC's defaults did at 4,000, 5,000 and 7,000.
# Run as `RLX=/tmp/rlx-dreamer bash run.sh` (a release build of the change);
# its commands are those of ../../env_steps.sh below, seeds 1 and 2 side
# by side, then seed 3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RATIO=512 CONFIG='"model_size": "micro", "learning_starts": 1024' BUDGET=6000 SIDES=dreamerv3 JOBS=2 bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" pendulum
