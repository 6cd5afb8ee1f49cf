#!/usr/bin/env bash
# Updates per second of BC, CQL and IQL in rlx and in d3rlpy on the same
# Parquet files (benches/offline/pendulum.sh's data), side by side in one
# session, three repetitions each, no evaluation: the medians and their
# ratio.
#
#   bash benches/offline/speed.sh <dataset dir> [rlx binary] [python with d3rlpy]
set -euo pipefail
DATA=$1
RLX=${2:-target/release/rlx}
PY=${3:-python3}
HERE=$(dirname "$0")
WORK=$(mktemp -d)
# rlx: BC takes 100 batches of 2,000 rows; CQL and IQL one update of 256
# rows per row read after 1,000 (`learning_starts`): 1,000 updates. rlx's
# time is the whole process (start, env, reading the first 1,000 rows),
# d3rlpy's its fit alone.
rlx_run() {
  local start end
  start=$(date +%s.%N)
  "$RLX" train --run "$1" --env Pendulum-v1 --stop "$2" --config "$3" --results-dir "$WORK/rlx" > /dev/null 2>&1
  end=$(date +%s.%N)
  python3 -c "print($4 / ($end - $start))"
}
declare -A RLX_RATES D3_RATES
for rep in 1 2 3; do
  RLX_RATES[BC]+=" $(rlx_run BC '{"training_iteration": 100}' "{\"input\": \"$DATA\"}" 100)"
  RLX_RATES[CQL]+=" $(rlx_run SAC '{"timesteps_total": 2000}' "{\"input\": \"$DATA\", \"min_q_weight\": 5.0, \"random_timesteps\": 0}" 1000)"
  RLX_RATES[IQL]+=" $(rlx_run IQL '{"timesteps_total": 2000}' "{\"input\": \"$DATA\"}" 1000)"
  for algo in BC CQL IQL; do
    D3_RATES[$algo]+=" $("$PY" "$HERE/d3rlpy_side.py" "$DATA" "$WORK/d3" --seeds $rep --algorithms $algo --speed 2>/dev/null | tail -1)"
  done
done
for algo in BC CQL IQL; do
  python3 - "$algo" "${RLX_RATES[$algo]}" "${D3_RATES[$algo]}" <<'PY'
import statistics, sys
algo, rlx, d3 = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
r, d = statistics.median(rlx), statistics.median(d3)
print(f"{algo}: rlx {r:.1f} updates/s {rlx}, d3rlpy {d:.1f} {d3}, ratio {r / d:.2f}")
PY
done
rm -rf "$WORK"
