#!/bin/bash
# usage: interleave.sh ALGO ENV STOP SEEDS OUTDIR
# Runs the issue's build (/tmp/ab/rlx-old, 35a9afb) and this change's
# (/tmp/ab/rlx-new) one after the other for each seed, printing
# side, seed, env steps, seconds, training mean, and env steps trained
# per second (divide by the train batch size for updates per second).
# The script is ../learner-2026-11-26e/interleave.sh, which later learned
# SIDES; without it, it runs old then new, as this one did.
exec "$(dirname "$0")/../learner-2026-11-26e/interleave.sh" "$@"
