#!/usr/bin/env python3
"""Record reference trajectories from Gymnasium for rlx-envs' fixture tests.

Run from the repository root:

    pip install gymnasium==1.0.0 numpy==2.4.6
    python3 envs/scripts/record_fixtures.py

For each seed the script makes the env with `gymnasium.make`, resets with
that seed once, then plays a fixed number of steps, resetting (unseeded, so
the env's own generator continues) whenever an episode ends. Actions come
from a seeded mix of uniform random actions and a simple per-env controller
(balancing for CartPole, energy pumping for the others), so both
termination and truncation are covered wherever the env has both. The
exploration rate is drawn per episode.

Continuous actions are float32 arrays, as an agent would pass them; for
MountainCarContinuous and Pendulum, which clip the action instead of
rejecting it, some actions lie outside the action space on purpose.

Per episode the fixture stores the exact float64 initial state (so the test
can start rlx from the same state), then per step: action (an int, or a
list of floats for Box actions), the float32 observation, reward,
terminated and truncated. Float32 values are written with the shortest
decimal that round-trips to the same float32.
"""
import json
import sys

import gymnasium as gym
import numpy as np


def f32(x):
    return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


def cartpole_action(rng, obs, eps):
    if rng.random() < eps:
        return int(rng.integers(2))
    x, x_dot, theta, theta_dot = obs
    return int(theta + 0.3 * theta_dot + 0.01 * x + 0.05 * x_dot > 0)


def mountain_car_action(rng, obs, eps):
    if rng.random() < eps:
        return int(rng.integers(3))
    return 2 if obs[1] >= 0 else 0


def mountain_car_continuous_action(rng, obs, eps):
    if rng.random() < eps:
        # Mostly inside Box(-1, 1); sometimes outside, which Gymnasium clips.
        a = rng.uniform(-1.0, 1.0) if rng.random() < 0.9 else rng.uniform(-2.0, 2.0)
    else:
        a = (1.0 if obs[1] >= 0 else -1.0) * rng.uniform(0.5, 1.2)
    return np.array([a], dtype=np.float32)


def acrobot_action(rng, obs, eps):
    if rng.random() < eps:
        return int(rng.integers(3))
    return 0 if obs[4] > 0 else 2


def pendulum_action(rng, obs, eps):
    if rng.random() < eps:
        # Mostly inside Box(-2, 2); sometimes outside, which Gymnasium clips.
        a = rng.uniform(-2.0, 2.0) if rng.random() < 0.9 else rng.uniform(-4.0, 4.0)
    else:
        a = 2.5 if obs[2] >= 0 else -2.5  # out of range: clipped to 2
    return np.array([a], dtype=np.float32)


ENVS = {
    # name: (seeds, steps per seed, policy, exploration rates)
    "CartPole-v1": ([0, 1, 2, 3, 4], 3000, cartpole_action, [0.05, 0.2, 1.0]),
    "MountainCar-v0": ([0, 1, 2, 3, 4], 2000, mountain_car_action, [0.1, 0.3, 1.0]),
    "MountainCarContinuous-v0": ([0, 1, 2, 3, 4], 2000, mountain_car_continuous_action, [0.1, 0.3, 1.0]),
    "Acrobot-v1": ([0, 1, 2, 3, 4], 2000, acrobot_action, [0.3, 0.7, 1.0]),
    "Pendulum-v1": ([0, 1, 2, 3, 4], 2000, pendulum_action, [0.3, 0.7, 1.0]),
}


def encode_action(a):
    if isinstance(a, np.ndarray):
        return [f32(v) for v in a]
    return a


def record(name, seeds, steps, policy, eps_choices):
    out = []
    for seed in seeds:
        env = gym.make(name)
        rng = np.random.default_rng(1000 + seed)
        obs, _ = env.reset(seed=seed)
        eps = float(rng.choice(eps_choices))
        ep = {"seed": seed, "init_state": env.unwrapped.state.tolist(), "init_obs": [f32(v) for v in obs],
              "actions": [], "obs": [], "rewards": [], "terminated": [], "truncated": []}
        for _ in range(steps):
            a = policy(rng, obs, eps)
            obs, r, term, trunc, _ = env.step(a)
            ep["actions"].append(encode_action(a))
            ep["obs"].append([f32(v) for v in obs])
            ep["rewards"].append(float(r))
            ep["terminated"].append(bool(term))
            ep["truncated"].append(bool(trunc))
            if term or trunc:
                out.append(ep)
                obs, _ = env.reset()
                eps = float(rng.choice(eps_choices))
                ep = {"seed": None, "init_state": env.unwrapped.state.tolist(), "init_obs": [f32(v) for v in obs],
                      "actions": [], "obs": [], "rewards": [], "terminated": [], "truncated": []}
        if ep["actions"]:
            out.append(ep)
    return out


def main():
    import gymnasium
    for name, (seeds, steps, policy, eps_choices) in ENVS.items():
        episodes = record(name, seeds, steps, policy, eps_choices)
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
