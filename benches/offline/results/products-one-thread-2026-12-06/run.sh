#!/usr/bin/env bash
# 2026-12-06, later: products kept on one thread inside an update's two
# halves and split only from 32M multiply-adds, convolutions on the same
# product, CQL's actor run once per row for its drawn actions; against
# 0546042's release build (OLD), beside d3rlpy at its best thread count
# (torch's default, two), nothing else running.
#
#   OLD=/tmp/rlx-base PY=/tmp/d3env/bin/python bash run.sh [new rlx binary]
here=$(cd "$(dirname "$0")" && pwd)
D3RLPY_THREADS=0 ENV=HalfCheetah-v5 OLD=${OLD:?an older rlx binary} bash "$here/../../speed.sh" \
  "$here/../halfcheetah-2026-12-06/data" "${1:-target/release/rlx}" "${PY:-python3}" | tee "$here/speed.txt"
