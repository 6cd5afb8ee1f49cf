"""rlx's Gymnasium worker: hosts copies of one Gymnasium env for an rlx process.

rlx starts this module as a child process (``python3 rlx_gym.py``) and
talks to it over its stdin and stdout. It needs only ``gymnasium`` and
``numpy`` (and whatever the env itself imports: ``ale_py`` for Atari,
``mujoco`` for MuJoCo).

Protocol. Every message is a frame: a little-endian ``u32`` length, then
that many bytes; the first byte of a frame says what it is.

rlx -> worker
  ``H`` + JSON   hello: ``{"id", "kwargs", "copies", "atari"}``, once
  ``R`` + u64[n] + u8[n]
                 reset copy i, with seed[i] where flag[i] is 1 and
                 unseeded (the env's generator continues) where it is 0
  ``S`` + data   step every copy: i64[n * width] (Discrete, MultiDiscrete)
                 or f32[n * width] (Box) actions
  ``Q``          quit

worker -> rlx
  ``H`` + JSON   the spaces, flattened (see ``describe``), once
  ``O`` + obs + masks
                 after a reset: the observations (f32 or u8 rows) and, if
                 the env has an ``action_mask``, the masks (u8 rows)
  ``T`` + obs + f64 rewards[n] + u8 terminated[n] + u8 truncated[n]
        + masks + (reset obs and masks of the copies whose episode ended)
                 after a step: the copies that ended were reset at once,
                 as rlx's vector envs do, and their reset rows follow in
                 copy order
  ``E`` + text   a Python exception's traceback; the worker then exits

PettingZoo. A hello with a ``"pettingzoo"`` key (the id, see
``make_pettingzoo``) makes one copy of a PettingZoo env, AEC or parallel,
and the messages carry one row per agent (``possible_agents`` order):

  ``R`` + u64 seed + u8 flag     reset
  ``O`` + obs + masks + u8 acting[agents]
  ``S`` + actions[agents] + u8 present[agents]
                                 step the agents present (a turn-based
                                 game: the one whose turn it is)
  ``T`` + obs + f64 rewards[agents] + u8 terminated[agents]
        + u8 truncated[agents] + masks + u8 acting[agents] + u8 all_done
                                 the agents' rewards of this step; no
                                 reset: rlx resets when it is all done

Observations are flattened to one row per copy, in this order: a ``Box``
row-major; a ``Discrete`` one-hot; a ``MultiBinary`` as 0/1; a ``Tuple``
element after element; a ``Dict`` key after key in the space's own order
(Gymnasium sorts keys), nested spaces recursively. A ``Dict`` or
``Tuple`` observation of two or more leaves (besides ``action_mask``) is
described entry by entry (``entries`` in the hello, named by their
dotted path), and its ``uint8`` ``Box`` entries are written as ``b / 255``
(channels last), so that rlx gives image entries their own convolutions
and keeps them as bytes; a single leaf stays one flat ``Box`` of its raw
values. A top-level ``Dict``
entry named ``action_mask`` is not observed: it is the mask of legal
actions. Only the stdout of this process carries frames: ``print`` in an
env goes to stderr.
"""

import difflib
import importlib
import json
import os
import select
import struct
import sys
import time
import traceback

import gymnasium as gym
import numpy as np


class Closed(Exception):
    """rlx closed the pipe: time to go."""


# How long to wait for a request by polling before sleeping in select().
# Waking a sleeping process on another core costs tens of microseconds on
# some machines (a virtual machine's inter-processor interrupt), as much as
# stepping several CartPole copies: a short spin keeps the step loop awake.
SPIN_S = 200e-6


class Input:
    """Frames read from a non-blocking file descriptor."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()
        os.set_blocking(fd, False)

    def _fill(self):
        deadline = time.perf_counter() + SPIN_S
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                if time.perf_counter() > deadline:
                    select.select([self.fd], [], [])
                else:
                    os.sched_yield()  # to a process that has work, if one shares the core
                continue
            if not chunk:
                raise Closed()
            self.buf += chunk
            return

    def frame(self):
        while len(self.buf) < 4:
            self._fill()
        (length,) = struct.unpack_from("<I", self.buf)
        while len(self.buf) < 4 + length:
            self._fill()
        frame = bytes(self.buf[4 : 4 + length])
        del self.buf[: 4 + length]
        return frame


def write_frame(stream, *parts):
    body = b"".join(parts)
    stream.write(struct.pack("<I", len(body)) + body)
    stream.flush()


class Unsupported(Exception):
    pass


def finite(values):
    """Bounds for JSON, which has no infinity: an unbounded side is null."""
    return [float(x) if np.isfinite(x) else None for x in values]


def space_name(space):
    shape = getattr(space, "shape", None)
    return f"{type(space).__name__}{'' if shape is None else shape} {space}"


def channels_first(shape):
    """Whether a 3-D image shape has its channels first: its first axis the
    shortest, as frame stacking makes it. rlx's convolutions read images
    channels last."""
    return len(shape) == 3 and shape[0] < shape[1] and shape[0] < shape[2]


class Layout:
    """How one observation becomes a flat row, and how a row of rlx's
    actions becomes a Gymnasium action."""

    def __init__(self, obs_space, act_space):
        import gymnasium.spaces as S

        self.S = S
        self.mask_key = None
        if isinstance(obs_space, S.Dict) and "action_mask" in obs_space.spaces:
            self.mask_key = "action_mask"
            mask_space = obs_space.spaces["action_mask"]
            self.mask_width = int(np.prod(mask_space.shape))
            obs_space = S.Dict({k: v for k, v in obs_space.spaces.items() if k != "action_mask"})
        else:
            self.mask_width = 0
        self.obs_space = obs_space
        # A single Box of uint8 crosses the pipe as bytes.
        self.bytes = isinstance(obs_space, S.Box) and obs_space.dtype == np.uint8
        self.parts = []  # (kind, size, extra, name) per leaf, in order
        self._leaves(obs_space, "observation", "")
        self.width = sum(part[1] for part in self.parts)
        # A Dict or Tuple is described entry by entry, but a single leaf
        # (PettingZoo's {"observation", "action_mask"}) stays one flat Box.
        self.by_entry = isinstance(obs_space, (S.Dict, S.Tuple)) and len(self.parts) >= 2
        self.act_space = act_space
        if isinstance(act_space, S.Discrete):
            self.action = ("discrete", 1, int(act_space.start))
        elif isinstance(act_space, S.MultiDiscrete):
            if act_space.nvec.ndim != 1:
                raise Unsupported(f"action space {space_name(act_space)}: only one-dimensional MultiDiscrete")
            self.action = ("multi", len(act_space.nvec), act_space.start.astype(np.int64))
        elif isinstance(act_space, S.Box) and np.issubdtype(act_space.dtype, np.floating):
            self.action = ("box", int(np.prod(act_space.shape)), act_space.shape)
        else:
            raise Unsupported(f"action space {space_name(act_space)} (rlx takes Discrete, MultiDiscrete and float Box actions)")

    def _leaves(self, space, where, name):
        S = self.S
        if isinstance(space, S.Box):
            if not (np.issubdtype(space.dtype, np.floating) or np.issubdtype(space.dtype, np.integer)):
                raise Unsupported(f"{where}: {space_name(space)} (Box observations must be float or integer)")
            low = np.broadcast_to(space.low, space.shape).astype(np.float64).ravel()
            high = np.broadcast_to(space.high, space.shape).astype(np.float64).ravel()
            if space.dtype == np.uint8:
                shape = list(space.shape)
                chw = channels_first(shape)
                if chw:
                    shape = shape[1:] + shape[:1]  # channels last
                self.parts.append(("bytes", len(low), (low, high, chw, shape), name))
            else:
                self.parts.append(("box", len(low), (low, high, list(space.shape)), name))
        elif isinstance(space, S.Discrete):
            self.parts.append(("onehot", int(space.n), int(space.start), name))
        elif isinstance(space, S.MultiBinary):
            size = int(np.prod(space.shape))
            self.parts.append(("box", size, (np.zeros(size), np.ones(size), [size]), name))
        elif isinstance(space, S.Tuple):
            for i, sub in enumerate(space.spaces):
                self._leaves(sub, f"{where}[{i}]", f"{name}.{i}" if name else str(i))
        elif isinstance(space, S.Dict):
            for key, sub in space.spaces.items():
                self._leaves(sub, f"{where}[{key!r}]", f"{name}.{key}" if name else str(key))
        else:
            raise Unsupported(f"{where}: {space_name(space)} (rlx takes Box, Discrete, MultiBinary, Tuple and Dict observations)")

    def describe(self):
        """The spaces as rlx sees them: the flat observation and the action."""
        S = self.S
        space = self.obs_space
        if isinstance(space, S.Box):
            low = np.broadcast_to(space.low, space.shape).astype(np.float64).ravel()
            high = np.broadcast_to(space.high, space.shape).astype(np.float64).ravel()
            shape = list(space.shape)
            if self.bytes:
                low, high = low / 255.0, high / 255.0
                if channels_first(shape):
                    shape = shape[1:] + shape[:1]  # stacked frames: channels last
        else:
            low = np.concatenate([self._bounds(p)[0] for p in self.parts])
            high = np.concatenate([self._bounds(p)[1] for p in self.parts])
            shape = [self.width]
        act = self.act_space
        if self.action[0] == "discrete":
            action = {"discrete": int(act.n)}
        elif self.action[0] == "multi":
            action = {"multi_discrete": [int(n) for n in act.nvec]}
        else:
            action = {
                "box": {
                    "low": finite(np.broadcast_to(act.low, act.shape).ravel()),
                    "high": finite(np.broadcast_to(act.high, act.shape).ravel()),
                    "shape": list(act.shape),
                }
            }
        return {
            "observation": {"low": finite(low), "high": finite(high), "shape": shape},
            "obs_bytes": self.bytes,
            "entries": self._entries(),
            "action": action,
            "mask_width": self.mask_width,
        }

    def _entries(self):
        """A Dict's or Tuple's leaves as rlx sees them, each with its name,
        bounds, shape and whether it is uint8 (written as b / 255); none
        for other spaces and a single leaf (``by_entry``)."""
        if not self.by_entry:
            return []
        entries = []
        for part in self.parts:
            low, high = self._bounds(part)
            kind, size, extra, name = part
            shape = [size] if kind == "onehot" else list(extra[-1])
            if kind == "bytes":
                low, high = low / 255.0, high / 255.0
            entries.append({"name": name, "low": finite(low), "high": finite(high), "shape": shape, "uint8": kind == "bytes"})
        return entries

    def _bounds(self, part):
        kind, size, extra, _ = part
        if kind == "onehot":
            return np.zeros(size), np.ones(size)
        return extra[0], extra[1]

    @property
    def plain(self):
        """Whether an observation is one Box, written as it is (the fast path)."""
        S = self.S
        return self.mask_key is None and isinstance(self.obs_space, S.Box) and not self.bytes

    def write(self, obs, out, mask_out):
        """Writes `obs` flattened into the row `out`, and its action mask,
        if the env has masks, into the row `mask_out`."""
        if self.mask_key is not None:
            mask_out[:] = np.asarray(obs[self.mask_key]).astype(np.uint8).ravel()
            obs = {k: v for k, v in obs.items() if k != "action_mask"}
        if self.bytes:
            obs = np.asarray(obs)
            if channels_first(obs.shape):
                obs = np.moveaxis(obs, 0, -1)
            out[:] = obs.ravel()
            return
        values = []
        self._flatten(self.obs_space, obs, values)
        start = 0
        for (kind, size, extra, _), v in zip(self.parts, values):
            if kind == "onehot":
                out[start : start + size] = 0.0
                out[start + int(v) - extra] = 1.0
            elif kind == "bytes" and self.by_entry:
                v = np.asarray(v)
                if extra[2]:
                    v = np.moveaxis(v, 0, -1)
                out[start : start + size] = v.ravel().astype(np.float32) / np.float32(255)
            else:
                out[start : start + size] = np.asarray(v, dtype=np.float32).ravel()
            start += size

    def _flatten(self, space, value, values):
        S = self.S
        if isinstance(space, S.Tuple):
            for sub, v in zip(space.spaces, value):
                self._flatten(sub, v, values)
        elif isinstance(space, S.Dict):
            for key, sub in space.spaces.items():
                self._flatten(sub, value[key], values)
        else:
            values.append(value)

    def actions(self, data, copies):
        kind, width, extra = self.action
        if kind == "box":
            rows = np.frombuffer(data, dtype="<f4").reshape(copies, width)
            return [row.reshape(extra).copy() for row in rows]
        rows = np.frombuffer(data, dtype="<i8").reshape(copies, width)
        if kind == "discrete":
            actions = rows[:, 0].tolist()
            return [a + extra for a in actions] if extra else actions
        return [row + extra for row in rows]


class EpisodicLife(gym.Wrapper):
    """Ends an episode when a life is lost, but resets the game only when
    it is over: after a lost life, `reset` returns the observation the
    life ended on and play goes on in the same game (Mnih et al. 2015).
    Gymnasium's own `terminal_on_life_loss` resets the whole game instead,
    so an agent would only ever see its first life. RLlib's and SB3's
    wrappers take one no-op step before the next life; this one does not,
    because ale-py's vector env (`serve_atari_vector`) cannot step one copy
    alone, and both paths must play the same episodes."""

    def __init__(self, env):
        super().__init__(env)
        self.lives = 0
        # The observation a life just ended on, while the game goes on.
        self.life_lost = None

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        lost = 0 < lives < self.lives
        # The game goes on after a lost life unless it ended anyway.
        self.life_lost = obs if lost and not (terminated or truncated) else None
        self.lives = lives
        return obs, reward, terminated or lost, truncated, info

    def reset(self, *, seed=None, options=None):
        if self.life_lost is not None and seed is None:
            obs, self.life_lost = self.life_lost, None
            return obs, {}
        obs, info = self.env.reset(seed=seed, options=options)
        self.life_lost = None
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


def imported(name):
    """`name` without its ``module:`` prefix, if it has one, after
    importing that module (which registers the env): Gymnasium's and
    PettingZoo's form for a user's own env."""
    if ":" in name:
        module, name = name.split(":", 1)
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            # The module itself (or its package) is missing, not something
            # it imports: that one keeps its own traceback.
            if e.name is None or not (module == e.name or module.startswith(e.name + ".")):
                raise
            raise LookupError(
                f"no module `{module}` to import before making `{name}`: install it into {sys.executable}, "
                "or run rlx in the directory that holds it"
            ) from None
    return name


def close_ids(name, ids):
    """Up to five of `ids` that look like `name`, as a sentence's tail."""
    close = difflib.get_close_matches(name, sorted(set(ids)), n=5, cutoff=0.6)
    return f"; close ids: {', '.join(close)}" if close else ""


def check_registered(env_id):
    """Refuses an id Gymnasium does not know, naming the ids close to it
    (Gymnasium's own message names the id but not its neighbours)."""
    try:
        gym.spec(env_id)
    except gym.error.UnregisteredEnv:
        raise LookupError(
            f"Gymnasium has no env `{env_id}`{close_ids(env_id, gym.registry.keys())} "
            "(gymnasium.pprint_registry() lists them all)"
        ) from None


def make_env(env_id, kwargs, atari):
    env_id = imported(env_id)
    if env_id.startswith("ALE/"):
        import ale_py

        gym.register_envs(ale_py)
    check_registered(env_id)
    if atari is not None:
        # DeepMind's Atari preprocessing (Mnih et al. 2015): the frame skip
        # happens in the wrapper, so the emulator must not skip too.
        kwargs = dict(kwargs)
        kwargs.setdefault("frameskip", 1)
        env = gym.make(env_id, **kwargs)
        env = gym.wrappers.AtariPreprocessing(
            env,
            noop_max=atari["noop_max"],
            frame_skip=atari["frame_skip"],
            screen_size=atari["screen_size"],
            terminal_on_life_loss=False,
            grayscale_obs=True,
        )
        if atari["clip_rewards"]:
            env = gym.wrappers.TransformReward(env, lambda r: float(np.sign(r)))
        if atari["frame_stack"] > 1:
            env = gym.wrappers.FrameStackObservation(env, atari["frame_stack"])
        if atari["terminal_on_life_loss"]:
            env = EpisodicLife(env)
        return env
    return gym.make(env_id, **kwargs)


# The keyword arguments of an ALE env that ale-py's vector env takes too.
VECTOR_ATARI_KWARGS = {"game", "obs_type", "repeat_action_probability", "full_action_space", "frameskip",
                       "max_num_frames_per_episode"}


def make_atari_vector(env_id, kwargs, atari, copies):
    """`copies` copies of an ``ALE/`` env in one ale-py ``AtariVectorEnv``
    (C++ threads, DeepMind's preprocessing in C++), and the emulator
    frames after which its episodes are cut. It is set up to play the
    same episodes as `make_env`'s wrappers: no fire on reset, sticky
    actions and seeds as the single env's, a life loss reported without a
    reset (``life_loss_info``), and episodes that end reset at once."""
    import ale_py

    version = getattr(ale_py, "__version__", "0")
    try:
        from ale_py.vector_env import AtariVectorEnv
        from gymnasium.vector import AutoresetMode

        usable = tuple(int(p) for p in version.split(".")[:3]) >= (0, 11, 1)
    except (ImportError, ValueError):
        usable = False
    if not usable:
        raise LookupError(
            f"ale-py {version} has no usable vector env (0.11.1 and later have ale_py.vector_env.AtariVectorEnv "
            "with autoreset modes; rlx is tested with 0.12.1): upgrade it, or set env_config.atari.vectorized to false"
        )

    env_id = imported(env_id)
    gym.register_envs(ale_py)
    check_registered(env_id)
    settings = dict(gym.spec(env_id).kwargs)
    settings["frameskip"] = 1  # the preprocessing skips frames, as make_env's does
    settings.update(kwargs)
    # gymnasium.make's time limit wraps the emulator, which steps one frame
    # at a time under the preprocessing: a limit of emulator frames.
    limit = settings.pop("max_episode_steps", None)
    if limit is not None:
        settings["max_num_frames_per_episode"] = min(int(limit), settings["max_num_frames_per_episode"])
    other = sorted(set(settings) - VECTOR_ATARI_KWARGS)
    if other:
        raise LookupError(
            f"env_config key(s) {', '.join(other)} are not taken by ale-py's vector env: set "
            "env_config.atari.vectorized to false to make each copy with gymnasium.make"
        )
    if settings["frameskip"] != 1:
        raise LookupError(
            f"env_config.frameskip is {settings['frameskip']}, but the Atari preprocessing already skips "
            "env_config.atari.frame_skip frames: leave frameskip out"
        )
    if settings.get("obs_type", "rgb") not in ("rgb", "grayscale"):
        raise LookupError(f"env_config.obs_type `{settings['obs_type']}`: Atari preprocessing needs images")
    threads = int(atari.get("num_threads") or 0) or min(copies, len(os.sched_getaffinity(0)))
    env = AtariVectorEnv(
        settings["game"],
        copies,
        num_threads=threads,
        max_num_frames_per_episode=settings["max_num_frames_per_episode"],
        repeat_action_probability=settings["repeat_action_probability"],
        full_action_space=settings["full_action_space"],
        autoreset_mode=AutoresetMode.SAME_STEP,
        img_height=atari["screen_size"],
        img_width=atari["screen_size"],
        grayscale=True,
        stack_num=atari["frame_stack"],
        frameskip=atari["frame_skip"],
        maxpool=True,
        # It draws 0 to noop_max - 1 no-ops, Gymnasium's wrapper 1 to noop_max.
        noop_max=atari["noop_max"] + 1 if atari["noop_max"] > 0 else 0,
        episodic_life=False,
        life_loss_info=atari["terminal_on_life_loss"],
        reward_clipping=atari["clip_rewards"],
        use_fire_reset=False,
    )
    return env, settings["max_num_frames_per_episode"]


def ale_seed(seed):
    """The emulator seed ale-py's single env derives from a reset seed
    (``AtariEnv.seed_game``), so that a vector copy seeded with it draws
    the single env's sticky actions. The single env's seed is a signed
    32-bit number and the vector env ignores negative ones, so those
    (half of all seeds) lose their sign bit: a copy is still seeded, but
    its sticky actions differ from the single env's."""
    return int(np.random.SeedSequence(seed).generate_state(n_words=2)[1]) & 0x7FFFFFFF


def make_pettingzoo(name, kwargs):
    """The PettingZoo env `name` and whether it is a parallel one.

    `name` is an id of PettingZoo's registry (``classic/tictactoe-v3``,
    the parallel form where there is one), ``module:Id`` (the module is
    imported first, to register ``Id``), or a module with a
    ``parallel_env`` or ``env`` function (``pettingzoo.classic.tictactoe_v3``
    or a user's own ``my_pkg.game``)."""
    import pettingzoo

    name = imported(name)
    for api in ("parallel", "aec"):
        if name in getattr(pettingzoo, f"{api}_registry", {}):
            return pettingzoo.make(api, name, **kwargs), api == "parallel"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or not name.startswith(e.name):
            raise
        ids = [i for api in ("parallel", "aec") for i in getattr(pettingzoo, f"{api}_registry", {})]
        raise LookupError(
            f"`{name}` is neither an id of PettingZoo's registry nor an importable module{close_ids(name, ids)}"
        ) from None
    if hasattr(module, "parallel_env"):
        return module.parallel_env(**kwargs), True
    if hasattr(module, "env"):
        return module.env(**kwargs), False
    raise LookupError(f"module `{name}` has neither a `parallel_env` nor an `env` function")


class Agents:
    """One PettingZoo env as rlx's multi-agent envs are: a row per agent
    of ``possible_agents``, the rewards each agent got in a step, and who
    acts next. An AEC env's agents that are done are stepped with ``None``
    here (PettingZoo's dead steps), so rlx only ever sees live turns."""

    def __init__(self, env, parallel):
        self.env = env
        self.parallel = parallel
        self.agents = list(env.possible_agents)
        if not self.agents:
            raise Unsupported("the env has no agents")
        first = self.agents[0]
        obs_space, act_space = env.observation_space(first), env.action_space(first)
        for a in self.agents[1:]:
            if env.observation_space(a) != obs_space or env.action_space(a) != act_space:
                raise Unsupported(
                    f"agent {a!r} has spaces {env.observation_space(a)} / {env.action_space(a)}, "
                    f"agent {first!r} {obs_space} / {act_space}: the agents must share their spaces"
                )
        self.layout = Layout(obs_space, act_space)
        n = len(self.agents)
        self.obs = np.zeros((n, self.layout.width), dtype=np.uint8 if self.layout.bytes else np.float32)
        self.masks = np.ones((n, self.layout.mask_width), dtype=np.uint8)
        self.acting = bytearray(n)

    def observe(self, i, o):
        self.layout.write(o, self.obs[i], self.masks[i])

    def reset(self, seed):
        env = self.env
        self.obs[:] = 0
        self.masks[:] = 1
        if self.parallel:
            obs, _ = env.reset(seed=seed)
        else:
            env.reset(seed=seed)
        missing = [a for a in self.agents if a not in env.agents]
        if missing:
            raise Unsupported(f"agents {missing} are not in the episode after a reset: rlx needs every agent from the start")
        for i, a in enumerate(self.agents):
            self.observe(i, obs[a] if self.parallel else env.observe(a))
            self.acting[i] = 1 if self.parallel or a == env.agent_selection else 0
        return [self.obs.tobytes(), self.masks.tobytes(), bytes(self.acting)]

    def step(self, actions, present):
        env = self.env
        n = len(self.agents)
        rewards = [0.0] * n
        flags = bytearray(2 * n)
        if self.parallel:
            act = {a: actions[i] for i, a in enumerate(self.agents) if present[i] and a in env.agents}
            obs, rew, term, trunc, _ = env.step(act)
            for i, a in enumerate(self.agents):
                if a in obs:
                    self.observe(i, obs[a])
                rewards[i] = float(rew.get(a, 0.0))
                flags[i] = bool(term.get(a, False))
                flags[n + i] = bool(trunc.get(a, False))
        else:
            mover = env.agent_selection
            i = self.agents.index(mover)
            if not present[i]:
                raise ValueError(f"no action for {mover!r}, whose turn it is")
            env.step(actions[i])
            for i, a in enumerate(self.agents):
                if a in env.rewards:
                    rewards[i] = float(env.rewards[a])
                    flags[i] = bool(env.terminations[a])
                    flags[n + i] = bool(env.truncations[a])
                    self.observe(i, env.observe(a))
            # PettingZoo's dead steps: an agent that is done still takes a
            # turn, with None, before it leaves.
            while env.agents and (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
                env.step(None)
        for i, a in enumerate(self.agents):
            self.acting[i] = 1 if a in env.agents and (self.parallel or a == env.agent_selection) else 0
        return [
            self.obs.tobytes(),
            struct.pack(f"<{n}d", *rewards),
            bytes(flags),
            self.masks.tobytes(),
            bytes(self.acting),
            bytes([0 if env.agents else 1]),
        ]


def serve_pettingzoo(hello, inp, out):
    """The worker of one PettingZoo env copy (see the protocol above)."""
    env, parallel = make_pettingzoo(hello["pettingzoo"], hello["kwargs"])
    agents = Agents(env, parallel)
    info = agents.layout.describe()
    info["agents"] = agents.agents
    write_frame(out, b"H", json.dumps(info).encode())
    n = len(agents.agents)
    while True:
        frame = inp.frame()
        tag = frame[:1]
        if tag == b"S":
            body = memoryview(frame)[1:]
            actions = agents.layout.actions(body[: len(body) - n], n)
            write_frame(out, b"T", *agents.step(actions, body[len(body) - n :]))
        elif tag == b"R":
            seed = struct.unpack_from("<Q", frame, 1)[0] if frame[9] else None
            write_frame(out, b"O", *agents.reset(seed))
        elif tag == b"Q":
            return 0
        else:
            raise ValueError(f"unknown message {tag!r}")


def reset_seeds(frame, n):
    """The seeds of an ``R`` message for `n` copies: an int for a copy to
    seed, ``None`` for one whose generator continues."""
    seeds = np.frombuffer(frame[1 : 1 + 8 * n], dtype="<u8")
    seeded = frame[1 + 8 * n :]
    return [int(seeds[i]) if seeded[i] else None for i in range(n)]


def serve_atari_vector(hello, inp, out):
    """The worker of ``copies`` copies of an Atari game in one ale-py vector
    env: one call steps them all on C++ threads. It answers as
    `serve_gym` does, with the same observations: the vector env pads a
    new episode's frame stack with zeros, `make_env`'s stack repeats the
    first frame, so the first ``frame_stack - 1`` observations of an
    episode get their zero frames replaced by that first frame."""
    n = int(hello["copies"])
    atari = hello["atari"]
    env, max_frames = make_atari_vector(hello["id"], hello["kwargs"], atari, n)
    space = env.single_observation_space
    if space.shape[0] == 1:  # one frame: a 2-D box, as FrameStackObservation is left out
        space = gym.spaces.Box(0, 255, space.shape[1:], np.uint8)
    layout = Layout(space, env.single_action_space)
    info = layout.describe()
    info["reward_threshold"] = None
    info["max_episode_steps"] = None
    write_frame(out, b"H", json.dumps(info).encode())

    stack = atari["frame_stack"]
    padded = np.zeros(n, dtype=np.int64)  # zero frames at the front of each copy's stack
    frames_played = np.zeros(n, dtype=np.int64)
    no_masks = b""

    def rows(frames, copies):
        """Stacks (copies, stack, h, w) as rows, channels last, after
        replacing each copy's leading zero frames by its first frame."""
        for row, i in enumerate(copies):
            k = padded[i]
            if k > 0:
                frames[row, :k] = frames[row, k]
        return np.ascontiguousarray(np.moveaxis(frames, 1, -1)).reshape(len(copies), layout.width)

    while True:
        frame = inp.frame()
        tag = frame[:1]
        if tag == b"S":
            actions = np.frombuffer(frame, dtype="<i8", count=n, offset=1)
            obs, rewards, terminated, truncated, info = env.step(actions)
            np.maximum(padded - 1, 0, out=padded)
            # A copy that was reset starts counting its frames again; one
            # that lost a life (an end too) plays on in the same game.
            played = info["episode_frame_number"].astype(np.int64)
            reset = (terminated | truncated) & (played <= frames_played)
            # A life lost on the step that reaches the frame limit comes
            # back terminated but not truncated; the single env says both.
            truncated = truncated | (reset & (frames_played + atari["frame_skip"] >= max_frames))
            frames_played = played
            final = obs.copy()
            if reset.any():
                final[reset] = info["final_obs"][reset]
            ended = np.flatnonzero(terminated | truncated)
            step_rows = rows(final, range(n))
            padded[reset] = stack - 1
            reset_rows = rows(obs[ended], ended)
            flags = np.concatenate([terminated, truncated]).astype(np.uint8)
            write_frame(
                out,
                b"T",
                step_rows.tobytes(),
                rewards.astype("<f8").tobytes(),
                flags.tobytes(),
                no_masks,
                reset_rows.tobytes(),
                no_masks,
            )
        elif tag == b"R":
            ale_seeds = np.array([-1 if s is None else ale_seed(s) for s in reset_seeds(frame, n)], dtype=np.int64)
            obs, info = env.reset(seed=ale_seeds)
            padded[:] = stack - 1
            frames_played = info["episode_frame_number"].astype(np.int64)
            write_frame(out, b"O", rows(obs, range(n)).tobytes(), no_masks)
        elif tag == b"V":
            reason = b"ale-py's vector env draws no frames of its copies: record with atari.vectorized false"
            write_frame(out, b"F", struct.pack("<II", 0, 0), reason)
        elif tag == b"Q":
            env.close()
            return 0
        else:
            raise ValueError(f"unknown message {tag!r}")


def rgb_frame(env):
    """The frame of ``env`` for a video, as the ``F`` reply's parts: height
    and width (little-endian u32s) and the RGB bytes; or height and width 0
    and the reason, as text."""
    try:
        modes = env.metadata.get("render_modes", [])
        if "rgb_array" not in modes:
            raise ValueError(f"{env.spec.id if env.spec else env} has no rgb_array rendering (render_modes: {modes})")
        if env.render_mode != "rgb_array":
            # Gymnasium fixes the render mode when an env is made, and rlx
            # makes its envs without one; the envs that offer rgb_array read
            # the attribute when they draw.
            env.unwrapped.render_mode = "rgb_array"
        image = np.asarray(env.render())
        if image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"render() returned an array of shape {image.shape}, not (height, width, 3)")
        image = np.ascontiguousarray(image, dtype=np.uint8)
        return struct.pack("<II", image.shape[0], image.shape[1]), image.tobytes()
    except Exception as e:  # the reason travels back; the worker goes on
        return struct.pack("<II", 0, 0), f"{type(e).__name__}: {e}".encode()


def serve_gym(hello, inp, out):
    """The worker of ``copies`` copies of a Gymnasium env."""
    atari = hello.get("atari")
    if atari is not None and atari.get("vectorized") and hello["id"].split(":")[-1].startswith("ALE/"):
        return serve_atari_vector(hello, inp, out)
    n = int(hello["copies"])
    envs = [make_env(hello["id"], hello["kwargs"], hello.get("atari")) for _ in range(n)]
    layout = Layout(envs[0].observation_space, envs[0].action_space)
    spec = envs[0].spec
    info = layout.describe()
    info["reward_threshold"] = getattr(spec, "reward_threshold", None)
    info["max_episode_steps"] = getattr(spec, "max_episode_steps", None)
    write_frame(out, b"H", json.dumps(info).encode())

    plain = layout.plain
    dtype = np.uint8 if layout.bytes else np.float32
    obs = np.zeros((n, layout.width), dtype=dtype)
    masks = np.ones((n, layout.mask_width), dtype=np.uint8)
    reset_obs = np.zeros((n, layout.width), dtype=dtype)
    reset_masks = np.ones((n, layout.mask_width), dtype=np.uint8)

    while True:
        frame = inp.frame()
        tag = frame[:1]
        if tag == b"S":
            # The hot loop: Python lists and bytearrays, one numpy
            # conversion per reply, a plain Box written row by row.
            ended = 0
            actions = layout.actions(memoryview(frame)[1:], n)
            rs = [0.0] * n
            flags = bytearray(2 * n)
            for i in range(n):
                env = envs[i]
                o, r, term, trunc, _ = env.step(actions[i])
                rs[i] = r
                if plain:
                    obs[i] = o.reshape(-1)
                else:
                    layout.write(o, obs[i], masks[i])
                if term or trunc:
                    flags[i] = 1 if term else 0
                    flags[n + i] = 1 if trunc else 0
                    o, _ = env.reset()
                    if plain:
                        reset_obs[ended] = o.reshape(-1)
                    else:
                        layout.write(o, reset_obs[ended], reset_masks[ended])
                    ended += 1
            write_frame(
                out,
                b"T",
                obs.tobytes(),
                struct.pack(f"<{n}d", *rs),
                bytes(flags),
                masks.tobytes(),
                reset_obs[:ended].tobytes(),
                reset_masks[:ended].tobytes(),
            )
        elif tag == b"R":
            for i, (env, seed) in enumerate(zip(envs, reset_seeds(frame, n))):
                o, _ = env.reset(seed=seed)
                layout.write(o, obs[i], masks[i])
            write_frame(out, b"O", obs.tobytes(), masks.tobytes())
        elif tag == b"V":
            (copy,) = struct.unpack("<I", frame[1:5])
            write_frame(out, b"F", *rgb_frame(envs[copy]))
        elif tag == b"Q":
            return 0
        else:
            raise ValueError(f"unknown message {tag!r}")


def main():
    # Like `python -m`, the working directory is importable, so that
    # `gym:my_module:MyEnv-v0` finds a module next to where rlx runs.
    sys.path.insert(1, os.getcwd())
    inp = Input(sys.stdin.fileno())
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a print() in an env must not corrupt the frames
    try:
        hello = json.loads(inp.frame()[1:])
        serve = serve_pettingzoo if "pettingzoo" in hello else serve_gym
        return serve(hello, inp, out)
    except Unsupported as e:
        write_frame(out, b"E", f"unsupported space: {e}".encode())
        return 1
    except Closed:
        return 0
    except BaseException:
        write_frame(out, b"E", traceback.format_exc().encode())
        return 1


if __name__ == "__main__":
    sys.exit(main())
