#!/usr/bin/env bash
# Before/after the CPU layers' loops compiled for AVX2 where the CPU has it
# (2026-11-26): "noavx" is the same source with the AVX2 branch switched
# off (the loops as before, 4 wide on SSE2), "avx" the change; both bench
# binaries copied aside. One after the other on the 2-core machine, nothing
# else running, two rounds. From the benches/ directory (criterion's cwd).
set -u
OUT=../benches/reference/results/learner-2026-11-26c
FILTER='models/learner/update/(sac_pendulum_256|ppo_cartpole_mlp_256|ppo_pendulum_gaussian_256)'
for round in 1 2; do
    for b in noavx avx; do
        /tmp/models-$b --bench "$FILTER" > $OUT/models-$b-$round.txt 2>&1
        /tmp/sampling-$b --bench "sampling/cartpole_ppo_policy/(0_actors/8|2_actors)" > $OUT/sampling-$b-$round.txt 2>&1
    done
    echo "round $round $(date -u +%T)"
done
rm -rf target
