#!/usr/bin/env bash
# rlx's AlphaZero and OpenSpiel's own on Connect Four, one after the other
# in one session on the same two cores (machines and days differ: on
# 2026-12-05 this machine self-played about 30 % slower than on
# 2026-12-04), each for the same wall time, then each last checkpoint
# against the same MCTSBot (1,000 simulations, random rollouts, solving),
# 50 games in each seat, the seats side by side.
#
#   bash benches/alpha_zero/side_by_side.sh RLX PYTHON OUT_DIR [MINUTES]
#
# GAMES (environment, default 50) sets the games in each seat.
#
# RLX is a release build of rlx; PYTHON a venv's python with open_spiel,
# jax, flax, optax and chex. rlx trains tuned_examples/alphazero-connect-four.yaml;
# OpenSpiel's flags are in open_spiel_reference.sh. About 2 h 40 min for
# MINUTES = 60. Writes OUT_DIR/rlx/{train.log,run dir,last.json} and
# OUT_DIR/open_spiel/ (see open_spiel_reference.sh).
set -euo pipefail
rlx=$1 py=$2 out=$3 minutes=${4:-60} games=${GAMES:-50}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/seats.sh"
mkdir -p "$out/rlx"
"$rlx" train -f "$here/../../tuned_examples/alphazero-connect-four.yaml" \
    --stop "{\"time_total_s\": $((minutes * 60))}" --checkpoint-at-end \
    --results-dir "$out/rlx" > "$out/rlx/train.log" 2>&1
run=$(ls -d "$out"/rlx/AlphaZero_ConnectFour_*)
last=$(ls -d "$run"/checkpoint_* | sort | tail -1)
echo "rlx's last checkpoint: $last"
both_seats "$py" "$here/vs_open_spiel.py" "$out/rlx/last" "$last" --rlx "$rlx" --games-per-seat "$games"
bash "$here/open_spiel_reference.sh" "$py" "$out/open_spiel" "$minutes"
