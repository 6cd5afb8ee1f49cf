#!/usr/bin/env python3
"""Record reference trajectories from Gymnasium for rlx-envs' fixture tests.

Run from the repository root:

    pip install gymnasium==1.0.0 numpy==2.4.6
    python3 envs/scripts/record_fixtures.py

For each seed the script makes the env with `gymnasium.make`, resets with
that seed once, then plays a fixed number of steps, resetting (unseeded, so
the env's own generator continues) whenever an episode ends. Actions come
from a seeded mix of uniform random actions and a simple balancing
controller, so episodes range from a dozen steps to the 500-step time limit
and both termination and truncation are covered.

Per episode the fixture stores the exact float64 initial state (so the test
can start rlx from the same state), then per step: action, the float32
observation, reward, terminated and truncated. Float32 values are written
with the shortest decimal that round-trips to the same float32.
"""
import json
import sys

import gymnasium as gym
import numpy as np

ENVS = {
    # name: (seeds, steps per seed)
    "CartPole-v1": ([0, 1, 2, 3, 4], 3000),
}


def f32(x):
    return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


def cartpole_action(rng, obs, eps):
    if rng.random() < eps:
        return int(rng.integers(2))
    x, x_dot, theta, theta_dot = obs
    return int(theta + 0.3 * theta_dot + 0.01 * x + 0.05 * x_dot > 0)


def record(name, seeds, steps):
    out = []
    for seed in seeds:
        env = gym.make(name)
        rng = np.random.default_rng(1000 + seed)
        obs, _ = env.reset(seed=seed)
        eps = float(rng.choice([0.05, 0.2, 1.0]))
        ep = {"seed": seed, "init_state": env.unwrapped.state.tolist(), "init_obs": [f32(v) for v in obs],
              "actions": [], "obs": [], "rewards": [], "terminated": [], "truncated": []}
        for _ in range(steps):
            a = cartpole_action(rng, obs, eps)
            obs, r, term, trunc, _ = env.step(a)
            ep["actions"].append(a)
            ep["obs"].append([f32(v) for v in obs])
            ep["rewards"].append(float(r))
            ep["terminated"].append(bool(term))
            ep["truncated"].append(bool(trunc))
            if term or trunc:
                out.append(ep)
                obs, _ = env.reset()
                eps = float(rng.choice([0.05, 0.2, 1.0]))
                ep = {"seed": None, "init_state": env.unwrapped.state.tolist(), "init_obs": [f32(v) for v in obs],
                      "actions": [], "obs": [], "rewards": [], "terminated": [], "truncated": []}
        if ep["actions"]:
            out.append(ep)
    return out


def main():
    import gymnasium
    for name, (seeds, steps) in ENVS.items():
        episodes = record(name, seeds, steps)
        doc = {
            "env": name,
            "made_with": {"gymnasium": gymnasium.__version__, "numpy": np.__version__,
                          "python": sys.version.split()[0]},
            "episodes": episodes,
        }
        path = f"envs/tests/fixtures/{name}.json"
        with open(path, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        n = sum(len(e["actions"]) for e in episodes)
        trunc = sum(e["truncated"][-1] for e in episodes if e["truncated"])
        print(f"{path}: {len(episodes)} episodes, {n} steps, {trunc} truncated")


if __name__ == "__main__":
    main()
