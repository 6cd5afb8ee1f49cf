#!/bin/bash
# GPU checks for rlx's cuda feature: the CPU-vs-GPU tests, the learner
# benchmarks, and PPO/SAC runs on cuda:0 and on the CPU of the same machine.
set -u
G=$(cd "$(dirname "$0")" && pwd)
cd "$G"
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
lscpu | grep -E 'Model name|^CPU\(s\)'
L=$(dirname "$(find /opt /usr/local /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)")
echo "cublas dir: $L"; ls "$L" | grep -E 'cublas|nvrtc' | head
export LD_LIBRARY_PATH="$L:${LD_LIBRARY_PATH:-}"
# dfdx compiles a few kernels with NVRTC at run time against the include
# directory found at build time (/opt/cuda13/include here).
I=""
for d in /usr/local/cuda/include "$L/../include"; do [ -f "$d/cuda_fp16.h" ] && I="$d" && break; done
echo "include: $I"; mkdir -p /opt/cuda13 && ln -sfn "$(cd "$I" && pwd)" /opt/cuda13/include
tar xzf bins.tgz
ls -la bin
export RLX_BENCH_QUICK=1 RUST_BACKTRACE=1
echo "== without dfdx's build headers: SAC on cuda"; RUST_BACKTRACE=0 timeout 60 bin/rlx train --run SAC --env Pendulum-v1 --seed 1 --config '{"device": "cuda"}' --stop '{"training_iteration": 2}' --results-dir /tmp/r 2>&1 | tail -12; echo "exit ${PIPESTATUS[0]}"
# dfdx's run-time NVRTC kernels include headers from its build directory.
mkdir -p /tmp/target-cuda/release/build/dfdx-66c017e33e7be93f/out && cp cuh/*.cuh /tmp/target-cuda/release/build/dfdx-66c017e33e7be93f/out/
echo "== tests"; timeout 120 bin/cuda-test --nocapture --test-threads 1
echo "== with them: SAC on cuda"; RUST_BACKTRACE=0 timeout 60 bin/rlx train --run SAC --env Pendulum-v1 --seed 1 --config '{"device": "cuda"}' --stop '{"training_iteration": 2}' --results-dir /tmp/r 2>&1 | tail -3; echo "exit ${PIPESTATUS[0]}"
