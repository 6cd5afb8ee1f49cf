#!/usr/bin/env python3
"""Record reference trajectories from MinAtar for rlx-envs' fixture tests.

Run from the repository root:

    pip install minatar==1.0.15 gymnasium==1.0.0 numpy==2.4.6
    python3 envs/scripts/record_minatar.py

Writes envs/tests/fixtures/MinAtar-<Game>-v1.json for Breakout,
SpaceInvaders, Asterix and Freeway, and MinAtar-mt19937.json, replayed by
envs/tests/minatar_reference.rs. With game names as arguments
(`python3 envs/scripts/record_minatar.py Asterix Freeway`), only those
games' files are written.

Trajectories: per game, ONE env from `gymnasium.make("MinAtar/<Game>-v1")`
(sticky actions 0.1, difficulty ramping, minimal action set, as registered)
serves every seed, so the sticky-action memory carries over seeded resets
as in the package. For each seed the env is reset with `reset(seed=seed)`,
then plays a fixed number of steps, resetting unseeded (the generator
continues) whenever an episode ends. Actions come from a seeded mix of
uniform random actions and a simple heuristic controller reading the game's
state, so episodes range from a few steps to hundreds and brick refills,
cleared alien waves and the difficulty ramp all occur.

Each observation (`env.state()`, bool (10, 10, C)) is stored as
base64(np.packbits(obs.flatten())): bits in row-major (row, col, channel)
order, most significant bit first, zero-padded to whole bytes. Per episode:
the seed of its reset (null for unseeded resets), the initial observation,
then per step the action (index into the minimal action set), observation,
reward, terminated and truncated.

The generator file holds, for many seeds, a sequence of NumPy legacy
`RandomState` calls (rand, randint over many ranges, choice) and their
results, to check rlx's MT19937 bit for bit. Seeds of 2**32 and above are
built as RandomState([seed & 0xffffffff, seed >> 32]).
"""
import base64
import json
import sys
from importlib.metadata import version

import gymnasium as gym
import numpy as np

from minatar.gym import register_envs

GAMES = {
    # name: (seeds, steps per seed)
    "MinAtar/Breakout-v1": ([0, 1, 2, 3, 4, 2**32 + 7], 2000),
    "MinAtar/SpaceInvaders-v1": ([0, 1, 2, 3, 4], 1800),
    "MinAtar/Asterix-v1": ([0, 1, 2, 3, 4, 2**32 + 7], 2000),
    # An episode is 2,500 steps: three seeds of 3,000 end three of them.
    "MinAtar/Freeway-v1": ([0, 1, 2], 3000),
    "MinAtar/Seaquest-v1": ([0, 1, 2, 3, 4, 2**32 + 7], 2000),
}


def encode(state):
    return base64.b64encode(np.packbits(np.asarray(state, dtype=bool).flatten())).decode()


def breakout_action(rng, game, eps):
    if rng.random() < eps:
        return int(rng.integers(3))
    # Move (0 no-op, 1 left, 2 right) toward where the ball will come down,
    # ignoring bricks; follow its column while it rises.
    x, y, d = game.ball_x, game.ball_y, game.ball_dir
    target = x
    if d in (2, 3):
        dx = 1 if d == 2 else -1
        while y < 8:
            x, y = x + dx, y + 1
            if x < 0 or x > 9:
                x, dx = min(max(x, 0), 9), -dx
        target = x
    if target < game.pos:
        return 1
    if target > game.pos:
        return 2
    return 0


def predicted_aliens(game, steps):
    """The alien map after each of the next `steps` steps, if nothing is shot."""
    aliens, d, timer = game.alien_map.copy(), game.alien_dir, game.alien_move_timer
    out = []
    for _ in range(steps):
        if timer == 0:
            timer = min(np.count_nonzero(aliens), game.enemy_move_interval)
            if (aliens[:, 0].any() and d < 0) or (aliens[:, 9].any() and d > 0):
                d = -d
                aliens = np.roll(aliens, 1, axis=0)
            else:
                aliens = np.roll(aliens, d, axis=1)
        timer -= 1
        out.append(aliens)
    return out


def space_invaders_action(rng, game, eps):
    if rng.random() < eps:
        return int(rng.integers(4))
    # 0 no-op, 1 left, 2 right, 3 fire.
    pos = game.pos
    danger = lambda c: game.e_bullet_map[6:9, c].any() or game.alien_map[8:10, c].any()
    if danger(pos):
        if pos > 0 and not danger(pos - 1):
            return 1
        return 2 if pos < 9 and not danger(pos + 1) else 0
    future = predicted_aliens(game, 9)
    # A bullet fired now is on row 9 - k after k steps.
    hits = lambda c, k0: any(future[k - 1][9 - k, c] for k in range(max(k0, 1), 10))
    if game.shot_timer == 0 and hits(pos, 1):
        return 3
    for dist in range(1, 10):
        for c in (pos - dist, pos + dist):
            if 0 <= c <= 9 and not danger(c) and hits(c, dist + 1):
                return 1 if c < pos else 2
    return 0


def asterix_action(rng, game, eps):
    if rng.random() < eps:
        return int(rng.integers(5))
    # 0 no-op, 1 left, 2 up, 3 right, 4 down: the move that keeps clear of
    # enemies next to the new cell and comes closest to some gold.
    moves = [(0, 0), (-1, 0), (0, -1), (1, 0), (0, 1)]
    enemies = [e for e in game.entities if e is not None and not e[3]]
    golds = [e for e in game.entities if e is not None and e[3]]
    best = None
    for a, (dx, dy) in enumerate(moves):
        x, y = min(9, max(0, game.player_x + dx)), min(8, max(1, game.player_y + dy))
        if any(e[1] == y and abs(e[0] - x) <= 1 for e in enemies):
            continue
        d = min((abs(g[0] - x) + abs(g[1] - y) for g in golds), default=0)
        if best is None or d < best[0]:
            best = (d, a)
    return best[1] if best else int(rng.integers(5))


def freeway_action(rng, game, eps):
    if rng.random() < eps:
        return int(rng.integers(3))
    # 0 no-op, 1 up, 2 down: up unless a car is about to cross column 4 on
    # the next row up.
    ahead = [c for c in game.cars if c[1] == game.pos - 1]
    if any(abs(c[0] - 4) <= 1 for c in ahead):
        return 0
    return 1


def seaquest_action(rng, game, eps):
    if rng.random() < eps:
        return int(rng.integers(6))
    # 0 no-op, 1 left, 2 up, 3 right, 4 down, 5 fire. Surface when oxygen
    # runs low with a diver aboard (or six aboard); otherwise dodge what is
    # next to the sub, chase the nearest diver's row, and fire along rows
    # with enemies.
    x, y = game.sub_x, game.sub_y
    threats = [e for e in game.e_fish + game.e_subs] + [[b[0], b[1]] for b in game.e_bullets]
    near = lambda cx, cy: any(t[1] == cy and abs(t[0] - cx) <= 1 for t in threats)
    if game.diver_count > 0 and (game.oxygen < 40 or game.diver_count == 6) and y > 0:
        return 2 if not near(x, y - 1) else int(rng.choice([1, 3]))
    if near(x, y):
        for a, (dx, dy) in ((2, (0, -1)), (4, (0, 1)), (1, (-1, 0)), (3, (1, 0))):
            if 0 <= x + dx <= 9 and 1 <= y + dy <= 8 and not near(x + dx, y + dy):
                return a
    if any(t[1] == y for t in game.e_fish + game.e_subs) and game.shot_timer == 0 and y > 0:
        return 5
    if game.divers and game.diver_count < 6:
        d = min(game.divers, key=lambda d: abs(d[1] - y) + abs(d[0] - x))
        if d[1] != y:
            return 4 if d[1] > y else 2
        return 3 if d[0] > x else 1
    return 4 if y < 4 else int(rng.integers(6))


POLICIES = {"Breakout": breakout_action, "SpaceInvaders": space_invaders_action, "Asterix": asterix_action,
            "Freeway": freeway_action, "Seaquest": seaquest_action}


def reset_env(env, seed):
    # Seeds beyond 32 bits: NumPy's RandomState(seed) refuses them; rlx uses
    # the two 32-bit words as an init_by_array key, which we reproduce here.
    if seed is not None and seed >= 2**32:
        words = [seed & 0xFFFFFFFF, seed >> 32]
        env.unwrapped.game.random = np.random.RandomState(words)
        env.unwrapped.game.env.random = env.unwrapped.game.random
        return env.reset()
    return env.reset(seed=seed)


def record(name, seeds, steps):
    env = gym.make(name)
    game_env = env.unwrapped.game.env
    policy = POLICIES[name.split("/")[1].split("-")[0]]
    out = []
    stats = {"terminations": 0, "max_return": 0, "max_ramp": 0}

    def new_episode(seed, obs):
        return {"seed": seed, "init_obs": encode(obs), "actions": [], "obs": [], "rewards": [],
                "terminated": [], "truncated": []}

    for seed in seeds:
        rng = np.random.default_rng(1000 + seed % 1000)
        obs, _ = reset_env(env, seed)
        eps = float(rng.choice([0.0, 0.02, 0.1, 1.0]))
        ep, ret = new_episode(seed, obs), 0
        for _ in range(steps):
            a = policy(rng, game_env, eps)
            obs, r, term, trunc, _ = env.step(a)
            ep["actions"].append(a)
            ep["obs"].append(encode(obs))
            ep["rewards"].append(int(r))
            ep["terminated"].append(bool(term))
            ep["truncated"].append(bool(trunc))
            ret += int(r)
            ramp = game_env.difficulty_ramp()
            stats["max_ramp"] = max(stats["max_ramp"], ramp or 0)
            if term or trunc:
                stats["terminations"] += int(term)
                stats["max_return"] = max(stats["max_return"], ret)
                out.append(ep)
                obs, _ = reset_env(env, None)
                eps = float(rng.choice([0.0, 0.02, 0.1, 1.0]))
                ep, ret = new_episode(None, obs), 0
        stats["max_return"] = max(stats["max_return"], ret)
        if ep["actions"]:
            out.append(ep)
    return out, stats


def rng_checks():
    cases = []
    py = np.random.default_rng(7)
    seeds = list(range(40)) + [2**31, 2**32 - 1, 123456789] + [int(s) for s in py.integers(0, 2**32, 20)]
    seeds += [2**32, 2**32 + 5, 2**64 - 1, 12345678901234567]
    bounds = [(0, 1), (0, 2), (0, 3), (0, 5), (0, 6), (0, 7), (0, 8), (0, 9), (0, 10), (1, 9), (1, 6), (-5, 1000),
              (0, 2**31), (0, 2**32 - 1), (0, 2**32), (0, 2**32 + 1), (-(2**40), 2**40), (0, 2**62 + 3),
              (-(2**63), 2**63 - 1)]
    for seed in seeds:
        r = np.random.RandomState(seed if seed < 2**32 else [seed & 0xFFFFFFFF, seed >> 32])
        ops = []
        for _ in range(120):
            k = int(py.integers(3))
            if k == 0:
                ops.append(["rand", float(r.rand())])
            elif k == 1:
                lo, hi = bounds[int(py.integers(len(bounds)))]
                ops.append(["randint", lo, hi, int(r.randint(lo, hi))])
            else:
                n = int(py.integers(1, 12))
                ops.append(["choice", n, int(r.choice(n))])
        # Far into the stream, past several regenerations of the state.
        r.randint(0, 2**32, size=3000, dtype=np.uint64)
        ops.append(["skip_u32", 3000])
        ops.append(["rand", float(r.rand())])
        cases.append({"seed": seed, "ops": ops})
    return cases


def main():
    register_envs()
    versions = {"minatar": version("minatar"), "gymnasium": gym.__version__, "numpy": np.__version__,
                "python": sys.version.split()[0]}
    only = sys.argv[1:]
    for name, (seeds, steps) in GAMES.items():
        if only and name.split("/")[1].split("-")[0] not in only:
            continue
        episodes, stats = record(name, seeds, steps)
        doc = {
            "env": name,
            "made_with": versions,
            "obs_encoding": "base64(np.packbits(state.flatten())), state bool (10, 10, C) row-major",
            "episodes": episodes,
        }
        path = f"envs/tests/fixtures/{name.replace('/', '-')}.json"
        with open(path, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        n = sum(len(e["actions"]) for e in episodes)
        print(f"{path}: {len(episodes)} episodes, {n} steps, {stats}")
    if only:
        return
    path = "envs/tests/fixtures/MinAtar-mt19937.json"
    with open(path, "w") as f:
        json.dump({"made_with": versions, "cases": rng_checks()}, f, separators=(",", ":"))
    print(path)


if __name__ == "__main__":
    main()
