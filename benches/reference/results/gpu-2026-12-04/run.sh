#!/bin/bash
# rlx on one NVIDIA H200 machine (16 cores), 2026-12-04, in one call:
# the CUDA tests (CPU against GPU for one update, DreamerV3 included),
# DreamerV3 on CUDA and on the CPU, DreamerV3 on MinAtar pixels on CUDA,
# and the seed's IMPALA table (benches/scripts/seed_table.sh) with the
# learner and the acting on CUDA and the Atari emulators on the cores.
# The binaries were built on the 2-core development machine (CUDA 13.0
# from PyPI wheels, as book/src/cuda.md describes) and carried over.
set -u
T0=$(date +%s)
D=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$D/.." && pwd)
W=/tmp/w; mkdir -p $W
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 555 - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
echo "cores $(nproc)"; free -g | head -2; uname -r
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$R"/.whl/*.whl
export PYTHONPATH=/tmp/site RLX_PYTHON=python3
python3 -c "import gymnasium, ale_py, numpy; print('gymnasium', gymnasium.__version__, 'ale_py', ale_py.__version__, 'numpy', numpy.__version__)"
L1=$(dirname "$(find /opt /usr/local /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)")
L2=$(dirname "$(find /opt /usr/local /usr/lib -name 'libnvrtc.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$L1:$L2:${LD_LIBRARY_PATH:-}"
mkdir -p /opt/cuda13 && ln -sfn /usr/local/cuda/include /opt/cuda13/include
mkdir -p "$(cat "$D/dfdx_out")" && cp "$D"/cuh/*.cuh "$(cat "$D/dfdx_out")/"
for b in rlx cuda-test; do
    [ -f "$D/$b.xz" ] && python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$D/$b.xz" "$D/$b" && chmod +x "$D/$b"
done
"$D/rlx" --version
log "setup done"

RLX_REQUIRE_CUDA=1 timeout 80 "$D/cuda-test" --test-threads 1 --nocapture > "$OUT/cuda-tests.log" 2>&1
log "cuda tests exit $?"; grep -E "^test |mean move|test result" "$OUT/cuda-tests.log"

dreamer() {  # name env device seconds extra-config
    timeout $(( $4 + 30 )) "$D/rlx" train --run DreamerV3 --env "$2" --seed 1 --stop "{\"time_total_s\": $4}" \
        --config "{\"device\": \"$3\"$5}" --results-dir "$W/dreamer-$1" > "$W/dreamer-$1.log" 2>&1
    log "dreamer $1 exit $?"; tail -1 "$W"/dreamer-$1/*/result.json | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print({k: d.get(k) for k in ['training_iteration','timesteps_total','num_env_steps_trained','episode_reward_mean','time_total_s']})"
}
# tuned_examples/dreamerv3-cartpole.yaml's model and ratio, shorter iterations.
MICRO=', "model_size": "micro", "batch_size_B": 16, "batch_length_T": 32, "training_ratio": 256, "learning_starts": 512, "timesteps_per_iteration": 200'
dreamer cartpole-cuda CartPole-v1 cuda 25 "$MICRO"
dreamer cartpole-cpu CartPole-v1 cpu 25 "$MICRO"
dreamer minatar-cuda MinAtar/Breakout-v1 cuda 30 "$MICRO"

S=$(( ($(left) - 40) / 4 ))
log "seed table: $S s per game"
export GRACE=25 RLX="$D/rlx" SECONDS_PER_GAME=$S WORKERS=14 ENVS=8 DEVICE=cuda OUT_TABLE=$W/seed-table
GAMES=Breakout OUT=$W/seed-table bash "$R/benches/scripts/seed_table.sh"
if ! ls $W/seed-table/IMPALA_gym-ALE-Breakout-v5*/result.json > /dev/null 2>&1; then
    log "IMPALA on cuda wrote nothing: the CPU instead"; tail -20 $W/seed-table/Breakout.log; export DEVICE=cpu
fi
GAMES="BeamRider Qbert SpaceInvaders" OUT=$W/seed-table bash "$R/benches/scripts/seed_table.sh"
cp $W/seed-table/summary.txt "$OUT/" 2>/dev/null
log "done"
cd $W && tar czf "$OUT/runs.tgz" --exclude='*.ckpt' --exclude='checkpoint_*' . && ls -la "$OUT"
