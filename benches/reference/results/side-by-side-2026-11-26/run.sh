#!/usr/bin/env bash
# The side-by-side table of book/src/performance.md, measured with the fixed
# harness: seeds 1-3, each seed's rlx run and reference run one after the
# other, nothing else running. From the repository root, after
#   cargo build --release -p rlx-benches --bin rlx-compare
# with a Python that has requirements.txt's packages in $PY (run.sh makes one).
set -euo pipefail
out=benches/reference/results/side-by-side-2026-11-26
PY=${PY:-target/python-bench/bin/python}
for seed in 1 2 3; do
  target/release/rlx-compare measure --seed "$seed" --out "$out/rlx-$seed.json"
  "$PY" benches/reference/harness.py --seed "$seed" --out "$out/reference-$seed.json"
done
target/release/rlx-compare table --rlx "$out"/rlx-{1,2,3}.json \
  --reference "$out"/reference-{1,2,3}.json > "$out/table.md"
