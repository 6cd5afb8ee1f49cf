#!/usr/bin/env bash
# Nested parallelism in AlphaZero's self-play: games per second on
# ConnectFour with 1 and 2 self-play evaluators, each searching alone or
# splitting its games over 2 or 4 search threads (its own and 1 or 3 more). Each layout plays
# 6 iterations of 64 games (100 simulations a move, the network of
# tuned_examples/alphazero-connect-four.yaml, no learning, no arena); the
# figure is the median of iterations 2-6 of the learner's
# `self_play_games_per_s` (the first warms up), with the raw result.json
# lines kept under the output directory.
#
#   bash benches/alpha_zero/nesting.sh [rlx binary] [output dir]
set -euo pipefail
RLX=${1:-target/release/rlx}
OUT=${2:-benches/alpha_zero/results/nesting-$(date +%F)}
mkdir -p "$OUT"
echo "evaluators search_workers games_per_s(median of iterations 2-6) mean_game_length"
for evaluators in 1 2; do
  for search in 0 2 4; do
    dir="$OUT/e${evaluators}_s${search}"
    rm -rf "$dir"
    config="{\"num_workers\": $evaluators, \"num_search_workers\": $search, \"games_per_iteration\": 64,
      \"games_in_flight\": 16, \"num_simulations\": 100, \"leaf_batch\": 8, \"num_sgd_steps\": 0,
      \"arena_interval\": 0, \"seed\": 1, \"model\": {\"conv_filters\": [[32, 3, 1], [64, 3, 1]],
      \"fcnet_hiddens\": [128], \"vf_share_layers\": true}}"
    "$RLX" train --run AlphaZero --env ConnectFour --config "$config" --stop '{"training_iteration": 6}' \
      --results-dir "$dir" > /dev/null
    python3 - "$dir" "$evaluators" "$search" <<'PY'
import glob, json, statistics, sys
lines = [json.loads(l) for l in open(glob.glob(sys.argv[1] + "/*/result.json")[0])]
rates = [l["learner"]["self_play_games_per_s"] for l in lines[1:]]
length = statistics.mean(l["learner"]["mean_game_length"] for l in lines)
print(f"{sys.argv[2]} {sys.argv[3]} {statistics.median(rates):.1f} {length:.1f}")
PY
  done
done
