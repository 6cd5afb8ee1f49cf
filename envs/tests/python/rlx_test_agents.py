"""PettingZoo envs of rlx's own tests: modules with a ``parallel_env``
function, loaded as ``pettingzoo:rlx_test_agents.<name>``."""

import os
import sys
import types

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class TwoCorridors(ParallelEnv):
    """Two agents, each in a corridor of ``length`` cells from cell 0:
    ``left`` moves forward with action 0, ``right`` with action 1, the
    other action moves back (not past cell 0). Each step costs 0.1; the
    last cell pays 1 and ends that agent; ``max_cycles`` steps truncate.
    An agent observes its cell one-hot and its own index."""

    metadata = {"name": "two_corridors_v0"}

    def __init__(self, length=10, max_cycles=50):
        self.length = length
        self.max_cycles = max_cycles
        self.possible_agents = ["left", "right"]
        self._obs = spaces.Box(0.0, 1.0, (length + 1,), np.float32)
        self._act = spaces.Discrete(2)

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def _observe(self, agent):
        o = np.zeros(self.length + 1, np.float32)
        o[self.cell[agent]] = 1.0
        o[-1] = self.possible_agents.index(agent)
        return o

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.cell = {a: 0 for a in self.agents}
        self.t = 0
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs, rew, term, trunc, info = {}, {}, {}, {}, {}
        for a in self.agents:
            forward = int(actions[a]) == self.possible_agents.index(a)
            self.cell[a] = min(self.length - 1, max(0, self.cell[a] + (1 if forward else -1)))
            done = self.cell[a] == self.length - 1
            obs[a] = self._observe(a)
            rew[a] = 1.0 if done else -0.1
            term[a] = done
            trunc[a] = not done and self.t >= self.max_cycles
            info[a] = {}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, info


class CrashOnce(TwoCorridors):
    """TwoCorridors whose process exits at its ``crash_at``-th step, once
    per run: the first process to get there leaves ``marker`` behind."""

    steps_in_process = 0

    def __init__(self, crash_at=500, marker=None, **kwargs):
        super().__init__(**kwargs)
        self.crash_at = crash_at
        self.marker = marker

    def step(self, actions):
        CrashOnce.steps_in_process += 1
        if CrashOnce.steps_in_process == self.crash_at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(3)
        return super().step(actions)


class UnequalSpaces(TwoCorridors):
    possible_agents = ["small", "big"]

    def __init__(self):
        super().__init__()
        self.possible_agents = ["small", "big"]

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (2 if agent == "small" else 3,), np.float32)


def _module(name, cls):
    module = types.ModuleType(f"{__name__}.{name}")
    module.parallel_env = cls
    sys.modules[module.__name__] = module
    return module


two_corridors = _module("two_corridors", TwoCorridors)
unequal_spaces = _module("unequal_spaces", UnequalSpaces)
crash_once = _module("crash_once", CrashOnce)
