#!/usr/bin/env bash
# The seed paper's IMPALA table (BeamRider, Breakout, Qbert, SpaceInvaders)
# for a fixed wall time per game, one game after another, each with the
# whole machine. The seed ran 32 workers for an hour per game; this runs
# what the machine at hand allows and says so in the summary.
#
#   RLX=target/release/rlx RLX_PYTHON=.venv/bin/python SECONDS_PER_GAME=3600 \
#   WORKERS=30 DEVICE=cpu OUT=seed-table bash benches/scripts/seed_table.sh
#
# Needs gymnasium and ale-py in RLX_PYTHON's interpreter. Writes each
# game's rlx results directory under $OUT and $OUT/summary.json
# (benches/scripts/seed_table.py).
set -u
RLX=${RLX:-target/release/rlx}
SECONDS_PER_GAME=${SECONDS_PER_GAME:-3600}
WORKERS=${WORKERS:-$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))}
ENVS=${ENVS:-8}
DEVICE=${DEVICE:-cpu}
GAMES=${GAMES:-"BeamRider Breakout Qbert SpaceInvaders"}
OUT=${OUT:-seed-table}
# Seconds a run may take past its stop before it is killed.
GRACE=${GRACE:-120}
mkdir -p "$OUT"
# RLlib's Atari IMPALA settings (rollouts of 50, batches of 500, lr 5e-4,
# entropy 0.01, gradient clip 40); the Nature CNN with one shared hidden
# layer of 256, as in the side-by-side runs of book/src/gymnasium.md.
CONFIG=$(printf '{"num_workers": %d, "num_envs_per_worker": %d, "device": "%s", "rollout_fragment_length": 50, "train_batch_size": 500, "timesteps_per_iteration": 5000, "lr": 0.0005, "entropy_coeff": 0.01, "grad_clip": 40.0, "model": {"fcnet_hiddens": [256], "vf_share_layers": true}}' "$WORKERS" "$ENVS" "$DEVICE")
for game in $GAMES; do
    echo "$game start $(date -u +%T)"
    timeout $(( SECONDS_PER_GAME + GRACE )) "$RLX" train --run IMPALA --env "gym:ALE/$game-v5" --seed 1 \
        --stop "{\"time_total_s\": $SECONDS_PER_GAME}" --config "$CONFIG" \
        --results-dir "$OUT" > "$OUT/$game.log" 2>&1
    echo "$game exit $? $(date -u +%T)"
done
"${RLX_PYTHON:-python3}" "$(dirname "$0")/seed_table.py" "$OUT" "$SECONDS_PER_GAME" "$WORKERS" "$ENVS" "$DEVICE" | tee "$OUT/summary.txt"
