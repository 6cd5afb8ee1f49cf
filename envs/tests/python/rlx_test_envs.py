"""Test-only Gymnasium envs for rlx's bridge tests, loaded as
``gym:rlx_test_envs:<Id>`` (the ``module:Id`` form imports this module,
which registers them)."""

import os
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Corridor(gym.Env):
    """Walk right along a corridor of `length` cells; reward 1 at the end,
    -0.01 per step. The observation is the position, one-hot (Discrete)."""

    def __init__(self, length=8):
        self.length = length
        self.observation_space = spaces.Discrete(length)
        self.action_space = spaces.Discrete(2)
        self.pos = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return self.pos, {}

    def step(self, action):
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        done = self.pos == self.length - 1
        return self.pos, (1.0 if done else -0.01), done, False, {}


class Faulty(gym.Env):
    """Counts steps per process and fails on step `fail_at` of its process:
    by raising (`how="raise"`), by exiting (`how="exit"`) or by hanging
    (`how="hang"`). The observation is [process id, steps in episode], so a
    test can check that no transition spans two processes."""

    steps_in_process = 0

    def __init__(self, fail_at=50, how="raise", marker=None):
        self.fail_at = fail_at
        self.how = how
        # With `how="exit_once"`: the file whose existence says a process
        # of this run already exited (a buggy simulator that crashes once).
        self.marker = marker
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def obs(self):
        return np.array([os.getpid(), self.t], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs(), {}

    def step(self, action):
        Faulty.steps_in_process += 1
        if Faulty.steps_in_process == self.fail_at:
            if self.how == "raise":
                raise ValueError(f"boom at step {self.fail_at}")
            if self.how == "exit":
                os._exit(3)
            if self.how == "exit_once" and not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os._exit(3)
            if self.how == "hang":
                time.sleep(3600)
        self.t += 1
        return self.obs(), 1.0, False, self.t >= 20, {}


class MaskedChoice(gym.Env):
    """A Dict observation with an action mask: pick the one legal action of
    four (reward 1, else -1). The legal action is shown one-hot under
    "legal", a Tuple of (Discrete, Box) under "extra"."""

    def __init__(self):
        self.observation_space = spaces.Dict(
            {
                "legal": spaces.Box(0.0, 1.0, (4,), np.float32),
                "extra": spaces.Tuple((spaces.Discrete(3), spaces.Box(-1.0, 1.0, (2,), np.float32))),
                "action_mask": spaces.MultiBinary(4),
            }
        )
        self.action_space = spaces.Discrete(4)
        self.legal = 0
        self.t = 0

    def obs(self):
        legal = np.zeros(4, dtype=np.float32)
        legal[self.legal] = 1.0
        mask = np.zeros(4, dtype=np.int8)
        mask[self.legal] = 1
        mask[(self.legal + 1) % 4] = 1
        return {"legal": legal, "extra": (self.t % 3, np.array([0.5, -0.5], dtype=np.float32)), "action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.legal = int(self.np_random.integers(4))
        self.t = 0
        return self.obs(), {}

    def step(self, action):
        reward = 1.0 if action == self.legal else -1.0
        self.legal = int(self.np_random.integers(4))
        self.t += 1
        return self.obs(), reward, False, self.t >= 10, {}


class TextObservations(gym.Env):
    observation_space = spaces.Text(8)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return "hello", {}

    def step(self, action):
        return "hello", 0.0, True, False, {}


class CameraAndVelocity(gym.Env):
    """A robot's observation: a uint8 camera image stored channels first
    (2 × 3 × 4) next to a float velocity. Pixel values count up by 7 from
    the step number, so every value and its place can be checked."""

    observation_space = spaces.Dict(
        {
            "camera": spaces.Box(0, 255, (2, 3, 4), np.uint8),
            "velocity": spaces.Box(-1.0, 1.0, (2,), np.float32),
        }
    )
    action_space = spaces.Discrete(2)

    def obs(self):
        camera = ((np.arange(24) * 7 + self.t) % 256).astype(np.uint8).reshape(2, 3, 4)
        return {"camera": camera, "velocity": np.array([0.25, -0.5 * self.t / 10], dtype=np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs(), {}

    def step(self, action):
        self.t += 1
        return self.obs(), float(action), False, self.t >= 10, {}


class MissionDict(gym.Env):
    """MiniGrid's observation shape: a Dict with an image and a Text
    mission, which rlx cannot flatten."""

    observation_space = spaces.Dict(
        {"image": spaces.Box(0, 255, (3, 3, 3), np.uint8), "mission": spaces.Text(32)}
    )
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, True, False, {}


gym.register("Corridor-v0", entry_point=Corridor, max_episode_steps=50)
gym.register("MissionDict-v0", entry_point=MissionDict)
gym.register("CameraAndVelocity-v0", entry_point=CameraAndVelocity)
gym.register("Faulty-v0", entry_point=Faulty)
gym.register("MaskedChoice-v0", entry_point=MaskedChoice)
gym.register("TextObservations-v0", entry_point=TextObservations)


class EchoMultiDiscrete(gym.Env):
    """MultiDiscrete([3, 2]) actions starting at [1, 0]: the observation is
    the action received, so a test sees what arrived."""

    observation_space = spaces.Box(-10.0, 10.0, (2,), np.float32)
    action_space = spaces.MultiDiscrete([3, 2], start=[1, 0])

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, dtype=np.int64)), action
        return np.asarray(action, dtype=np.float32), 0.0, False, False, {}


gym.register("EchoMultiDiscrete-v0", entry_point=EchoMultiDiscrete)
