#!/usr/bin/env bash
# Load test of `rlx serve` beside onnxruntime behind Python's HTTP server,
# on one machine over loopback: REQUESTS requests (default 100,000) of one
# CartPole observation from CLIENTS concurrent keep-alive clients, against
#   1. rlx serve with batching (the defaults: up to 64 rows, 200 µs wait);
#   2. rlx serve without batching (--max-batch 1 --batch-wait-us 0);
#   3. benches/serve/ort_server.py: the exported ONNX model in onnxruntime.
# Each runs SEEDS times (default 3), alternating; raw JSON lines go to
# OUT/load.jsonl and a median table to OUT/summary.md.
#
#   cargo build --release -p rlx-cli -p rlx-benches --bin rlx --bin rlx-load
#   bash benches/serve/load.sh target/release PYTHON OUT
set -euo pipefail
BIN=${1:?target directory with rlx and rlx-load}
PY=${2:?a python with onnxruntime and numpy}
OUT=${3:?output directory}
REQUESTS=${REQUESTS:-100000}
CLIENTS=${CLIENTS:-32}
SEEDS=${SEEDS:-3}
mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -f "$OUT/load.jsonl"
rm -rf "$RUNS"
"$BIN/rlx" train --run PPO --env CartPole-v1 --stop '{"episode_reward_mean": 200}' --checkpoint-at-end \
  --results-dir "$RUNS" > "$OUT/train.log" 2>&1
RUN=$(ls -d "$RUNS"/*/ | head -1)
"$BIN/rlx" export "$RUN" -o "$OUT/policy.onnx" | tee "$OUT/export.log"
PORT=$((20000 + RANDOM % 20000))
pid=""
stop() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  pid=""
}
trap stop EXIT
wait_port() {
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on $PORT" >&2; return 1
}
for seed in $(seq 1 "$SEEDS"); do
  for server in batched unbatched onnxruntime; do
    PORT=$((PORT + 1))
    case $server in
      batched) "$BIN/rlx" serve "$RUN" --listen "127.0.0.1:$PORT" > /dev/null 2>&1 & pid=$! ;;
      unbatched) "$BIN/rlx" serve "$RUN" --listen "127.0.0.1:$PORT" --max-batch 1 --batch-wait-us 0 > /dev/null 2>&1 & pid=$! ;;
      onnxruntime) "$PY" benches/serve/ort_server.py "$OUT/policy.onnx" "$PORT" > /dev/null 2>&1 & pid=$! ;;
    esac
    wait_port
    "$BIN/rlx-load" --addr "127.0.0.1:$PORT" --requests "$REQUESTS" --clients "$CLIENTS" --width 4 \
      --label "$server" --out "$OUT/load.jsonl"
    stop
  done
done
"$PY" - "$OUT/load.jsonl" > "$OUT/summary.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| server | runs | requests/s (median) | p50 ms | p99 ms | failed |")
print("|---|---|---|---|---|---|")
for label in ["batched", "unbatched", "onnxruntime"]:
    r = [x for x in rows if x["label"] == label]
    if not r:
        continue
    med = lambda k: statistics.median(x[k] for x in r)
    print(f"| {label} | {len(r)} | {med('requests_per_s'):.0f} | {med('p50_ms'):.2f} | {med('p99_ms'):.2f} | {sum(x['failed'] for x in r)} |")
PY
cat "$OUT/summary.md"
