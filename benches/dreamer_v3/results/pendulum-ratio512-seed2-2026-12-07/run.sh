#!/usr/bin/env bash
# 2026-12-07 (second sitting): seed 2 of ../pendulum-ratio512-prob-2026-12-07/
# with the same committed code (a release build of f3366ba; 01a868b is the
# same behaviour), beside rlx's CQL HalfCheetah run (benches/offline), so
# its wall time is not comparable with the other runs'.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RATIO=512 CONFIG='"model_size": "micro", "learning_starts": 1024' BUDGET=6000 SIDES=dreamerv3 JOBS=1 bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" pendulum "2"
