#!/bin/bash
# The CPU-vs-GPU learner tests after the CPU learner's taped tanh.
set -u
G=$(cd "$(dirname "$0")" && pwd); cd "$G"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
L=$(dirname "$(find /opt /usr/local /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$L:${LD_LIBRARY_PATH:-}"
mkdir -p /opt/cuda13 && ln -sfn /usr/local/cuda/include /opt/cuda13/include
mkdir -p /tmp/target-cuda/release/build/dfdx-66c017e33e7be93f/out && cp cuh/*.cuh /tmp/target-cuda/release/build/dfdx-66c017e33e7be93f/out/
tar xzf bins.tgz
timeout 120 bin/cuda-test --nocapture --test-threads 1
