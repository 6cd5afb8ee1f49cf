#!/usr/bin/env python3
"""Env steps per second of Gymnasium envs outside rlx, to set beside the
`gym_bridge` criterion suite (benches/benches/gym_bridge.rs):

- `loop`: 8 copies stepped one after another in a plain Python loop, with
  an automatic reset when an episode ends (what the bridge's worker does,
  minus the pipe);
- `sb3_dummy`, `sb3_subproc`: Stable-Baselines3's DummyVecEnv (same
  process) and SubprocVecEnv (one process per copy) over the 8 copies;
- `sb3_ppo_sampling`: SB3's PPO collecting 1024 rows (8 copies x 128
  steps) with its default MLP policy, the same as rlx's
  `gym_bridge_sampling` (CartPole only);
- with `--atari-raw` only: Breakout's 8 copies stepped raw by the C++
  vector envs, each in its own loop: ale-py's `AtariVectorEnv` (set up as
  rlx's worker sets it up, `rlx_gym.make_atari_vector`) and EnvPool's
  `Breakout-v5` (its own DeepMind preprocessing, episodic life and reward
  clipping on), each on 1 and 2 threads, beside the plain loop;
- with `--atari-policy` only: SB3's PPO collecting 512 rows (8 copies x
  64 steps) of Breakout with its `CnnPolicy` cut to the network of rlx's
  `ppo_cnn_policy` and RLlib's side (the Nature CNN, then one shared
  hidden layer of 256), in each of SB3's shapes: `DummyVecEnv` with torch
  on 1 and on 2 threads, and `SubprocVecEnv` with torch on 1.

The envs are made by rlx's own worker module (`envs/python/rlx_gym.py`),
so they carry the same wrappers (DeepMind's preprocessing for Atari). The
actions follow the suite's pattern: every action in turn, copy i offset by i.

Usage (an interpreter with gymnasium, ale-py, opencv and stable-baselines3):

    python benches/scripts/gym_throughput.py --out results.json [--seconds 3] [--repeats 5]

Prints and writes the median of `--repeats` timings of `--seconds` each.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "envs", "python"))
import rlx_gym  # noqa: E402

COPIES = 8
ENVS = [("CartPole-v1", 2, None), ("ALE/Breakout-v5", 4, dict(noop_max=30, frame_skip=4, screen_size=84, frame_stack=4, terminal_on_life_loss=True, clip_rewards=True))]


def make(env_id, atari):
    return lambda: rlx_gym.make_env(env_id, {}, atari)


def plain_loop(env_id, n_actions, atari, seconds):
    envs = [make(env_id, atari)() for _ in range(COPIES)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    steps, k = 0, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for i, e in enumerate(envs):
            _, _, term, trunc, _ = e.step((i + k) % n_actions)
            if term or trunc:
                e.reset()
        steps += COPIES
        k += 1
    return steps / (time.perf_counter() - t0)


def vector_loop(env, n_actions, seconds):
    """Steps a vector env of 8 copies that resets ended copies itself
    (ale-py's, EnvPool's, SB3's) with the suite's action pattern."""
    import numpy as np

    patterns = [np.array([(i + k) % n_actions for i in range(COPIES)], dtype=np.int64) for k in range(n_actions)]
    env.reset()
    steps, k = 0, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env.step(patterns[k % n_actions])
        steps += COPIES
        k += 1
    rate = steps / (time.perf_counter() - t0)
    env.close()
    return rate


def ale_vector(threads, seconds):
    env_id, n_actions, atari = ENVS[1]
    env, _ = rlx_gym.make_atari_vector(env_id, {}, dict(atari, num_threads=threads), COPIES)
    return vector_loop(env, n_actions, seconds)


def envpool_vector(threads, seconds):
    import envpool

    env = envpool.make("Breakout-v5", env_type="gymnasium", num_envs=COPIES, num_threads=threads, seed=0,
                       episodic_life=True, reward_clip=True, repeat_action_probability=0.25, noop_max=30)
    return vector_loop(env, ENVS[1][1], seconds)


def sb3_vec(cls, env_id, n_actions, atari, seconds):
    venv = cls([make(env_id, atari) for _ in range(COPIES)])
    venv.seed(0)
    return vector_loop(venv, n_actions, seconds)


def collect_rate(model, steps, seconds):
    """Rows per second of SB3's `collect_rollouts`, `steps` per copy a call,
    over `seconds`."""
    from stable_baselines3.common.callbacks import CallbackList

    model._setup_learn(10**9, CallbackList([]))
    callback = CallbackList([])
    callback.init_callback(model)
    rows = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=steps)
        rows += steps * COPIES
    return rows / (time.perf_counter() - t0)


def sb3_ppo_sampling(seconds):
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    venv = DummyVecEnv([make("CartPole-v1", None) for _ in range(COPIES)])
    return collect_rate(PPO("MlpPolicy", venv, n_steps=128, seed=1, device="cpu"), 128, seconds)


def sb3_ppo_atari_sampling(seconds, vec_cls, threads):
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(threads)
    env_id, _, atari = ENVS[1]
    venv = vec_cls([make(env_id, atari) for _ in range(COPIES)])
    model = PPO("CnnPolicy", venv, n_steps=64, seed=1, device="cpu",
                policy_kwargs={"features_extractor_kwargs": {"features_dim": 256}})
    rate = collect_rate(model, 64, seconds)
    model.env.close()
    return rate


def timed(runs, key, fn, repeats, unit="steps"):
    """`repeats` rates of `fn` into `runs[key]`, their median printed."""
    rates = [fn() for _ in range(repeats)]
    runs[key] = rates
    print(f"{key:48} median {statistics.median(rates):8.0f} {unit}/s  {[round(r) for r in rates]}", flush=True)


def write(path, meta, runs):
    with open(path, "w") as f:
        json.dump({"meta": meta, "steps_per_s": runs}, f, indent=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--atari-policy", action="store_true", help="only SB3's PPO sampling Breakout with a CNN")
    parser.add_argument("--atari-raw", action="store_true", help="only Breakout stepped raw: plain loop, ale-py's and EnvPool's vector envs")
    args = parser.parse_args()
    if args.atari_raw:
        env_id, n_actions, atari = ENVS[1]
        runs = {}
        for name, fn in [
            ("loop", lambda: plain_loop(env_id, n_actions, atari, args.seconds)),
            ("ale_vector_1_thread", lambda: ale_vector(1, args.seconds)),
            ("ale_vector_2_threads", lambda: ale_vector(2, args.seconds)),
            ("envpool_1_thread", lambda: envpool_vector(1, args.seconds)),
            ("envpool_2_threads", lambda: envpool_vector(2, args.seconds)),
        ]:
            timed(runs, f"{env_id}/{name}", fn, args.repeats)
        import ale_py, envpool

        write(args.out, {"ale_py": ale_py.__version__, "envpool": envpool.__version__, "seconds": args.seconds}, runs)
        return
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    if args.atari_policy:
        runs = {}
        for name, cls, threads in [("dummy_1_thread", DummyVecEnv, 1), ("dummy_2_threads", DummyVecEnv, 2),
                                   ("subproc_1_thread", SubprocVecEnv, 1)]:
            sample = lambda: sb3_ppo_atari_sampling(args.seconds, cls, threads)  # noqa: E731
            timed(runs, f"ALE/Breakout-v5/sb3_ppo_cnn_sampling/{name}", sample, args.repeats, "rows")
        import stable_baselines3, torch

        meta = {"stable_baselines3": stable_baselines3.__version__, "torch": torch.__version__, "seconds": args.seconds}
        write(args.out, meta, runs)
        return

    runs = {}
    for env_id, n_actions, atari in ENVS:
        for name, fn in [
            ("loop", lambda: plain_loop(env_id, n_actions, atari, args.seconds)),
            ("sb3_dummy", lambda: sb3_vec(DummyVecEnv, env_id, n_actions, atari, args.seconds)),
            ("sb3_subproc", lambda: sb3_vec(SubprocVecEnv, env_id, n_actions, atari, args.seconds)),
        ]:
            timed(runs, f"{env_id}/{name}", fn, args.repeats)
    timed(runs, "CartPole-v1/sb3_ppo_sampling", lambda: sb3_ppo_sampling(args.seconds), args.repeats, "rows")
    import gymnasium, numpy, stable_baselines3

    meta = {"gymnasium": gymnasium.__version__, "numpy": numpy.__version__, "stable_baselines3": stable_baselines3.__version__, "seconds": args.seconds}
    write(args.out, meta, runs)


if __name__ == "__main__":
    main()
