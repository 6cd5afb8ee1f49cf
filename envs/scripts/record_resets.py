#!/usr/bin/env python3
"""Record Gymnasium's reset starts and NumPy's PCG64 outputs for rlx-envs' tests.

Run from the repository root (the versions the committed fixtures came from):

    pip install gymnasium==1.4.0 numpy==2.4.6
    python3 envs/scripts/record_resets.py

Writes two files under envs/tests/fixtures/:

- numpy-pcg64.json: for a few seeds (small, 32-bit and 64-bit), the first
  raw 64-bit outputs of np.random.default_rng(seed), its first doubles
  (Generator.random) and uniform draws in a few intervals.
- gymnasium-resets.json: for each classic-control env and seeds 0..19, the
  observation (float32) and float64 state after reset(seed=s), then after
  two more unseeded resets (the env's generator continues).

Numbers are written as their exact bits (float32 as integers, float64 and
64-bit integers as decimal strings), so nothing is lost in decimal.
"""
import json

import gymnasium as gym
import numpy as np

ENVS = ["CartPole-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1", "Pendulum-v1"]
SEEDS = list(range(20))


def f32_bits(values):
    return [int(np.float32(v).view(np.uint32)) for v in np.asarray(values, dtype=np.float32).ravel()]


def f64_bits(values):
    return [str(int(np.float64(v).view(np.uint64))) for v in np.asarray(values, dtype=np.float64).ravel()]


def numpy_fixture():
    out = []
    for seed in [0, 1, 7, 12345, 2**32 - 1, 2**32, 2**40 + 5, 2**64 - 1]:
        rng = np.random.default_rng(seed)
        raw = [str(int(x)) for x in rng.bit_generator.random_raw(8)]
        rng = np.random.default_rng(seed)
        doubles = f64_bits(rng.random(8))
        rng = np.random.default_rng(seed)
        uniforms = f64_bits([rng.uniform(-0.05, 0.05), rng.uniform(-0.6, -0.4), rng.uniform(-np.pi, np.pi)])
        out.append({"seed": str(seed), "raw": raw, "random": doubles, "uniform": uniforms})
    return out


def state_of(env):
    u = env.unwrapped
    state = np.asarray(u.state, dtype=np.float64)
    return f64_bits(state)


def resets_fixture():
    out = []
    for name in ENVS:
        env = gym.make(name)
        for seed in SEEDS:
            starts = []
            obs, _ = env.reset(seed=seed)
            starts.append({"obs": f32_bits(obs), "state": state_of(env)})
            for _ in range(2):
                obs, _ = env.reset()
                starts.append({"obs": f32_bits(obs), "state": state_of(env)})
            out.append({"env": name, "seed": seed, "starts": starts})
        env.close()
    return out


if __name__ == "__main__":
    with open("envs/tests/fixtures/numpy-pcg64.json", "w") as f:
        json.dump({"numpy": np.__version__, "generators": numpy_fixture()}, f, indent=1)
        f.write("\n")
    with open("envs/tests/fixtures/gymnasium-resets.json", "w") as f:
        json.dump({"gymnasium": gym.__version__, "numpy": np.__version__, "resets": resets_fixture()}, f)
        f.write("\n")
