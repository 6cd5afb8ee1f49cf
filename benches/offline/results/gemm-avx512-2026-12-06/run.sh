#!/usr/bin/env bash
# 2026-12-06: the CPU layers' products on gemm 0.19 with AVX-512 kernels,
# against c060c0a's release build (OLD: gemm 0.15, and BC still running its
# value network), beside d3rlpy at its best thread count on this idle
# machine (torch's default, two; one was slower in bc-value-net-2026-12-06).
#
#   OLD=/tmp/rlx-old PY=/tmp/d3env/bin/python bash run.sh [new rlx binary]
here=$(cd "$(dirname "$0")" && pwd)
D3RLPY_THREADS=0 ENV=HalfCheetah-v5 OLD=${OLD:-/tmp/rlx-old} bash "$here/../../speed.sh" \
  "$here/../halfcheetah-2026-12-06/data" "${1:-target/release/rlx}" "${PY:-python3}" | tee "$here/speed.txt"
