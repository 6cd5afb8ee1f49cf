#!/usr/bin/env bash
# OpenSpiel's own AlphaZero (open_spiel 2.0.2, its JAX implementation) on
# Connect Four for the wall time rlx's tuned example trains
# (tuned_examples/alphazero-connect-four.yaml: 60 minutes), on the same
# two cores, then its last checkpoint against the MCTSBot that rlx's
# checkpoints play (benches/alpha_zero/vs_open_spiel.py), 50 games in each
# seat, the seats side by side.
#
#   bash benches/alpha_zero/open_spiel_reference.sh PYTHON OUT_DIR [MINUTES]
#
# GAMES (environment, default 50) sets the games in each seat.
#
# PYTHON is a venv's python with open_spiel, jax, flax, optax and chex.
# Flags are OpenSpiel's example defaults except:
# - the search as rlx's tuned example: 100 simulations a self-play move,
#   c = 1.5 in the same PUCT rule, the first 12 moves drawn at
#   temperature 1 (the example's 2 is for TicTacToe's short games);
# - the network: the nnx API and an MLP of two 128-unit layers, its
#   fastest (one inference on this machine: MLP 3.7 ms, conv2d 64x2 11 ms,
#   resnet 64x2 16 ms, with the linen API 4x slower), since OpenSpiel
#   evaluates one leaf per call and the hour is spent in inference;
# - 2 actors and no evaluator processes (evaluation comes after, as rlx's),
#   a replay of 4,096 positions each learned from 8 times, so that the
#   learner steps about every 500 new positions.
set -euo pipefail
py=$1 out=$2 minutes=${3:-60} games=${GAMES:-50}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/seats.sh"
mkdir -p "$out"
run="$out/run"
rm -rf "$run"
setsid "$py" -m open_spiel.python.examples.alpha_zero --game connect_four --path "$run" \
    --nn_api nnx --nn_model mlp --nn_width 128 --nn_depth 2 \
    --max_simulations 100 --uct_c 1.5 --temperature_drop 12 \
    --actors 2 --evaluators 0 --replay_buffer_size 4096 --replay_buffer_reuse 8 \
    --checkpoint_freq 5 --max_steps 0 > "$out/train.log" 2>&1 &
pid=$!
sleep $((minutes * 60))
kill -- -"$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
"$py" "$here/open_spiel_reference.py" "$run" --timeline > "$out/timeline.tsv"
last=$(awk -F'\t' '$2 <= '"$minutes"' && $1 > 0 { s = $1 } END { print s }' "$out/timeline.tsv")
if [ -z "$last" ]; then
    echo "no checkpoint within $minutes minutes (the learner saves one every 5 steps of about 500 positions)" >&2
    exit 1
fi
echo "last checkpoint within $minutes minutes: $last"
both_seats "$py" "$here/open_spiel_reference.py" "$out/step_$last" "$run" --step "$last" --games-per-seat "$games"
