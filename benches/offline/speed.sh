#!/usr/bin/env bash
# Updates per second of BC, CQL and IQL in rlx and in d3rlpy on the same
# Parquet files, side by side in one session, three repetitions each,
# alternating, no evaluation: the medians and their ratio.
#
#   bash benches/offline/speed.sh <dataset dir> [rlx binary] [python with d3rlpy]
#
# Two workloads:
# - Pendulum (the default; benches/offline/pendulum.sh's data): 64-wide
#   networks, BC 100 batches of 2,000 rows, CQL and IQL one update of 256
#   rows per row read after 1,000 (`learning_starts`): 1,000 updates. rlx's
#   time is the whole process (start, env, reading the first 1,000 rows),
#   d3rlpy's its fit alone.
# - MuJoCo (ENV=HalfCheetah-v5, halfcheetah.sh's data and settings): two
#   256-wide layers, 256 rows an update, IQL and CQL with the whole dataset
#   in the buffer first; BC 5,000, IQL 3,000, CQL 300 updates. rlx's rate is
#   over its training iterations (from result.json: the updates after the
#   first iteration that made one, over their time), d3rlpy's over its fit.
#
# ALGORITHMS (default "BC CQL IQL") picks the algorithms; OLD=<rlx binary>
# adds an older build as a third side (an A/B of rlx against itself);
# D3RLPY_THREADS (default "1 0") the torch thread counts to try (0: torch's
# default, one a core), each a side of its own.
set -euo pipefail
DATA=$1
RLX=${2:-target/release/rlx}
PY=${3:-python3}
HERE=$(dirname "$0")
WORK=$(mktemp -d)
ENV=${ENV:-Pendulum-v1}
# MuJoCo: the dataset's rows, IQL's and CQL's `learning_starts`.
[ "$ENV" = Pendulum-v1 ] || ROWS=$("$RLX" dataset info "$DATA" | awk '/^steps:/ {print $2}')

# Pendulum: the whole process timed, `$4` updates.
rlx_pendulum() {
  local start end
  start=$(date +%s.%N)
  "$1" train --run "$2" --env Pendulum-v1 --stop "$3" --config "$4" --results-dir "$WORK/rlx" > /dev/null 2>&1
  end=$(date +%s.%N)
  python3 -c "print($5 / ($end - $start))"
}

# MuJoCo: the rate over the training iterations.
rlx_mujoco() {
  rm -rf "$WORK/rlx"
  "$1" train --run "$2" --env "gym:$ENV" --stop "$3" --config "$4" --results-dir "$WORK/rlx" > /dev/null 2>&1
  python3 - "$WORK"/rlx/*/result.json <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
trained = [l for l in lines if l["num_env_steps_trained"] > 0]
first, last = trained[0], trained[-1]
updates = (last["num_env_steps_trained"] - first["num_env_steps_trained"]) / 256
print(updates / (last["time_total_s"] - first["time_total_s"]))
PY
}

rlx_rate() {  # binary, algorithm
  local bin=$1 algo=$2
  if [ "$ENV" = Pendulum-v1 ]; then
    case $algo in
      BC) rlx_pendulum "$bin" BC '{"training_iteration": 100}' "{\"input\": \"$DATA\"}" 100 ;;
      CQL) rlx_pendulum "$bin" SAC '{"timesteps_total": 2000}' "{\"input\": \"$DATA\", \"min_q_weight\": 5.0, \"random_timesteps\": 0}" 1000 ;;
      IQL) rlx_pendulum "$bin" IQL '{"timesteps_total": 2000}' "{\"input\": \"$DATA\"}" 1000 ;;
    esac
    return
  fi
  local net='"model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}'
  case $algo in
    BC) rlx_mujoco "$bin" BC '{"training_iteration": 5000}' \
          "{\"input\": \"$DATA\", \"train_batch_size\": 256, \"lr\": 0.001, $net}" ;;
    IQL) rlx_mujoco "$bin" IQL "{\"timesteps_total\": $((ROWS + 3000))}" \
          "{\"input\": \"$DATA\", \"learning_starts\": $ROWS, \"timesteps_per_iteration\": 500, $net}" ;;
    CQL) rlx_mujoco "$bin" SAC "{\"timesteps_total\": $((ROWS + 300))}" \
          "{\"input\": \"$DATA\", \"min_q_weight\": 5.0, \"random_timesteps\": 0, \"learning_starts\": $ROWS, \"actor_lr\": 0.0003, \"critic_lr\": 0.0003, \"alpha_lr\": 0.0003, \"timesteps_per_iteration\": 50, $net}" ;;
  esac
}

d3rlpy_rate() {  # algorithm, seed, threads
  local args=(--seeds "$2" --algorithms "$1" --speed --threads "$3")
  [ "$ENV" = Pendulum-v1 ] || args+=(--env "$ENV" --hidden 256 --updates "$(case $1 in BC) echo 5000 ;; IQL) echo 3000 ;; CQL) echo 300 ;; esac)")
  "$PY" "$HERE/d3rlpy_side.py" "$DATA" "$WORK/d3" "${args[@]}" 2>/dev/null | tail -1
}

ALGORITHMS=${ALGORITHMS:-BC CQL IQL}
THREADS=${D3RLPY_THREADS:-1 0}
declare -A RATES
for rep in 1 2 3; do
  for algo in $ALGORITHMS; do
    RATES[$algo rlx]+=" $(rlx_rate "$RLX" "$algo")"
    [ -z "${OLD:-}" ] || RATES[$algo rlx-old]+=" $(rlx_rate "$OLD" "$algo")"
    for t in $THREADS; do
      RATES[$algo d3rlpy-threads-$t]+=" $(d3rlpy_rate "$algo" "$rep" "$t")"
    done
  done
done
for algo in $ALGORITHMS; do
  sides=("rlx")
  [ -z "${OLD:-}" ] || sides+=("rlx-old")
  for t in $THREADS; do sides+=("d3rlpy-threads-$t"); done
  for side in "${sides[@]}"; do echo "$algo $side${RATES[$algo $side]}"; done
done | python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin]
med = {(r[0], r[1]): statistics.median(map(float, r[2:])) for r in rows}
for r in rows:
    algo, side = r[0], r[1]
    best_d3 = max(v for (a, s), v in med.items() if a == algo and s.startswith("d3rlpy"))
    print(f"{algo} {side}: median {med[algo, side]:.1f} updates/s {[round(float(x), 1) for x in r[2:]]}, "
          f"ratio to d3rlpy at its best {med[algo, side] / best_d3:.2f}")
'
rm -rf "$WORK"
