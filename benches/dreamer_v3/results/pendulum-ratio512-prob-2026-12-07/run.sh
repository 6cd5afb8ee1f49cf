#!/usr/bin/env bash
# 2026-12-07: ../pendulum-ratio512-fixes-2026-12-07/ again with the build
# that was committed (RLX=/tmp/rlx-prob: imagined continue flags are the
# head's probability, a constant, not its mode), seeds 1 and 3 side by
# side (the session's time allowed two).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RATIO=512 CONFIG='"model_size": "micro", "learning_starts": 1024' BUDGET=6000 SIDES=dreamerv3 JOBS=2 bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" pendulum "1 3"
