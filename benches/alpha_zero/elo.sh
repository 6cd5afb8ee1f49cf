#!/usr/bin/env bash
# An Elo table over one AlphaZero run's checkpoints, with random play and
# pure MCTS (1,000 simulations, random rollouts) in the field: every two
# players meet in GAMES games, half with each first, each two after 2
# random plies; the checkpoints search 200 simulations a move.
#
#   benches/alpha_zero/elo.sh RLX RUN_DIR OUT_DIR [GAMES]
#
# Writes OUT_DIR/elo.json (the table and every pairing) and
# OUT_DIR/elo.txt (the printed table and the pairings as they finished).
set -euo pipefail
rlx=$1 run=$2 out=$3 games=${4:-60}
mkdir -p "$out"
checkpoints=()
for it in 000100 000500 001000 002000 003000 004000 005000 006000 007400; do
    checkpoints+=("$run/checkpoint_$it")
done
{ time "$rlx" arena "${checkpoints[@]}" --opponent random --opponent mcts_1000 \
    --simulations 200 --games "$games" --opening-plies 2 --seed 1 --out "$out/elo.json"; } > "$out/elo.txt" 2>&1
cat "$out/elo.txt"
