#!/usr/bin/env bash
# 2026-12-07 (third sitting): DreamerV3 on Pendulum with the `mini` model
# (64 units, a GRU of 64, 16 x 16 latents) instead of the tuned example's
# `micro` (32, 32, 8 x 8), at its training_ratio of 512 (one update of
# 16 x 32 replayed steps per env step), greedy evaluation of 10 episodes
# every 1,000 env steps, to a greedy -200 or 6,000 env steps. The
# DreamerV3 paper reports larger models learning from fewer env steps; at
# micro's size the reward loss was still 1.6 at 6,000 env steps. Release
# build of f3366ba (01a868b is the same behaviour); seeds one after the
# other, beside rlx's CQL HalfCheetah run (benches/offline): wall times
# are not speed figures. How it went: `bash run.sh` (seeds 1, 2, 3 one
# after the other) ran seed 1 beside CQL; 19 minutes in, with rlx's CQL run
# paused, seed 2 and seed 3 were started beside it (SEEDS=2, SEEDS=3, each
# its own invocation), three DreamerV3 runs on the two cores. When seed 1
# ended, the first invocation went on to its own seed 2, which removed the
# running seed 2's directory and truncated its log; it was stopped at
# once. The first seed 2's result.json, progress.csv and event file were
# copied from its open files (/proc/<pid>/fd) as it went on, its
# params.json from the identical one of the stopped duplicate; its log
# lost its first three iterations (result.json has them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RATIO=512 CONFIG='"model_size": "mini", "learning_starts": 1024' BUDGET=6000 SIDES=dreamerv3 JOBS=${JOBS:-1} bash "$here/../../env_steps.sh" "${RLX:-target/release/rlx}" "$here" pendulum "${SEEDS:-1 2 3}"
