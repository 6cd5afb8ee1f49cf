#!/usr/bin/env bash
# SAC's defaults beside run.sh's DreamerV3 runs, with the same greedy
# evaluation every 500 env steps, but up to 20,000 env steps: run.sh's own
# SAC runs stopped at 6,000, before seeds 2 and 3 reached -200 (kept in
# sac-to-6000/; the same trajectories up to 6,000 env steps).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
EVERY=500 SIDES=SAC bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" pendulum "${SEEDS:-1 2 3}"
