#!/usr/bin/env bash
# Issue 45's cluster measurements on a machine with more cores than the
# 2-core development machine: PPO's throughput with 16 evaluators on 0, 1,
# 2, 4 and 8 nodes (each a network namespace on a private bridge), and the
# control plane at 128, 256 and 512 nodes.
# Needs root, iproute2 and a Rust toolchain. Writes under OUT (default
# benches/reference/results/cluster-<date>-<host>), with the machine
# described in machine.txt. Usage: benches/swarm/larger_machine.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-benches/reference/results/cluster-$(date -u +%F)-$(hostname -s)}
mkdir -p "$OUT"
{ date -u; uname -a; nproc; grep -m1 "model name" /proc/cpuinfo || true; free -g | head -2; } > "$OUT/machine.txt"
cargo build --release -p rlx-cli --bin rlx -p rlx-benches --bin rlx-swarm
# Each evaluator's CartPole sampling is light; 8 nodes of 2 CPUs each hold
# 16 evaluators. The 0-node run puts all of them in the driver.
target/release/rlx-swarm scale --nodes 0,1,2,4,8 --workers 16 --repeats 3 --seconds 30 --out "$OUT/scale"
target/release/rlx-swarm control-plane --sizes 128,256,512 --out "$OUT/control-plane"
echo "done: $OUT"
