#!/usr/bin/env bash
# 2026-12-06: BC leaves MARWIL's value network out of its forward and
# backward pass (`ActorCriticLoss::uses_values`), against the build before
# (OLD, a copy of c060c0a's release binary).
#   1. Same numbers: seeded BC (separate and shared value layers) and
#      MARWIL (which still uses its values) on the HalfCheetah files, every
#      result line's returns, losses and statistics, times left out.
#   2. Speed: benches/offline/speed.sh at MuJoCo widths with the old build
#      as a third side: rlx, rlx-old and d3rlpy (one and two torch threads),
#      three runs each, alternating, nothing else running.
#
#   OLD=/tmp/rlx-old NEW=target/release/rlx PY=/tmp/d3env/bin/python bash run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd) DATA=$(cd "$(dirname "$0")/../halfcheetah-2026-12-06/data" && pwd) W=$(mktemp -d)
OLD=${OLD:-/tmp/rlx-old} NEW=${NEW:-target/release/rlx}
NET='"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"'
RUN='"input": "'$DATA'", "train_batch_size": 256, "evaluation_interval": 1000, "evaluation_duration": 2'
for case in "BC|$NET" "BC-shared|$NET, \"vf_share_layers\": true" "MARWIL|$NET"; do
  name=${case%%|*} model=${case#*|}
  for side in OLD NEW; do
    "${!side}" train --run "${name%-shared}" --env gym:HalfCheetah-v5 --seed 1 --stop '{"training_iteration": 2000}' \
      --config "{$RUN, \"model\": {$model}}" --results-dir "$W/$name-$side" > /dev/null 2>&1
  done
  python3 "$here/../../compare_runs.py" "$W/$name-OLD" "$W/$name-NEW" "$name-HalfCheetah"
done | tee "$here/same-numbers.txt"
rm -rf "$W"
OLD=$OLD ENV=HalfCheetah-v5 bash "$here/../../speed.sh" "$DATA" "$NEW" "${PY:-python3}" | tee "$here/speed.txt"
