#!/usr/bin/env python3
"""The reference side of rlx's side-by-side benchmark.

Measures, on this machine, the workloads that `rlx-compare measure` measures
for rlx, and writes one JSON file:

* raw CartPole-v1 stepping in Gymnasium (one core, random actions);
* RLlib PPO sampling throughput with 0, 1 and 2 env runners (a 2x64 tanh MLP,
  8 envs per runner), env steps per second;
* with ``--only rllib_multi_agent_sampling``: RLlib's multi-agent sampling
  on its MultiAgentCartPole with 2, 8 and 32 agents, one shared policy or a
  policy per agent, for 0/1/2 env runners x 1/8 envs, agent steps per second;
* with ``--only rllib_sampling --env ALE/Breakout-v5``: the same on Atari
  Breakout with RLlib's Atari preprocessing and the Nature CNN;
* with ``--only rllib_impala_atari``: RLlib's IMPALA on an Atari game for
  ``--budget-s`` seconds, its learning curve;
* with ``--only sb3_halfcheetah --algo sac|ppo``: SB3 with the zoo's
  HalfCheetah hyperparameters for ``--budget-s`` seconds, its curve;
* with ``--workload rllib_solve --algo dqn|appo|impala|sac`` (as
  learning.py runs it): RLlib's own example for DQN, APPO or IMPALA on
  CartPole-v1 or SAC on Pendulum-v1, until both criteria below are met;
* RLlib PPO (its tuned example with its best env runners here, 2 x 8, and
  as shipped), SB3 PPO and SB3 DQN: wall seconds and env steps until the
  mean return of the last 100 training episodes reaches 475, and until a
  greedy evaluation of 10 episodes, about every 10k env steps, reaches 475
  (the zoo's criterion; SB3 within the zoo's n_timesteps), and the peak
  memory of the run.

Every workload runs in a child process of this script. Peak memory is the
largest sum of the resident set sizes of that child and all its descendants
(Ray's GCS, raylet and worker processes included), sampled every 50 ms.

Run it through `run.sh`, which creates the virtual environment first:

    bash benches/reference/run.sh --out benches/reference/results/reference.json
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

STEPS_PER_SAMPLE = 4096
SOLVE_RETURN = 475.0


# ---------------------------------------------------------------- workloads
# Each runs in its own process (`harness.py --workload NAME`) and prints one
# JSON object on its last line of stdout.


def raw_cartpole(args):
    import gymnasium as gym
    import numpy as np

    out = {}
    for label, env in [("gym.make", gym.make("CartPole-v1")), ("unwrapped", gym.make("CartPole-v1").unwrapped)]:
        env.reset(seed=0)
        actions = np.random.default_rng(0).integers(0, 2, size=1_000_000)
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < args.seconds:
            for a in actions[:10_000]:
                _, _, term, trunc, _ = env.step(int(a))
                if term or trunc:
                    env.reset()
            steps += 10_000
        out[label] = steps / (time.perf_counter() - t0)
    return {"steps_per_s": out["gym.make"], "unwrapped_steps_per_s": out["unwrapped"]}


def _rllib_model(config, hiddens, activation, share):
    try:
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

        return config.rl_module(
            model_config=DefaultModelConfig(fcnet_hiddens=hiddens, fcnet_activation=activation, vf_share_layers=share)
        )
    except ImportError:
        return config.rl_module(
            model_config_dict={"fcnet_hiddens": hiddens, "fcnet_activation": activation, "vf_share_layers": share}
        )


def _ray_init():
    import ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level="ERROR")


def _sample_episodes(algo, runners, env_steps):
    """The episodes of one round of about `env_steps` env steps: the local
    env runner's with no remote ones, else split over the remote runners
    (`foreach_env_runner` since Ray 2.44, `foreach_worker` before, as in
    the pinned 2.40)."""
    if runners == 0:
        return list(algo.env_runner.sample(num_timesteps=env_steps))
    group = algo.env_runner_group
    foreach = getattr(group, "foreach_env_runner", None) or group.foreach_worker
    per = env_steps // runners
    return [e for batch in foreach(lambda r: r.sample(num_timesteps=per), local_env_runner=False) for e in batch]


def _rates(sample_once, seconds):
    """Steps per second of `sample_once` calls (each returns its steps),
    after 3 warm-up calls, for `seconds` and at least 5 calls, sorted."""
    for _ in range(3):
        sample_once()
    times, steps = [], []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(times) < 5:
        t0 = time.perf_counter()
        steps.append(sample_once())
        times.append(time.perf_counter() - t0)
    return sorted(s / t for s, t in zip(steps, times))


NATURE_CNN = [[32, 8, 4], [64, 4, 2], [64, 3, 1]]


def _rllib_atari(env_id):
    """Registers RLlib's own Atari preprocessing for `env_id`, an
    `ALE/<Game>-v5` id (its `wrap_atari_for_new_api_stack`: 84x84
    grayscale, frame skip 4 with the
    max of the last two frames, up to 30 no-ops, a lost life ends the
    episode, FIRE after reset, 4 stacked frames; rewards clipped by the
    config) and returns the env's name. The emulator skips no frames
    itself, as in rlx's preprocessing; sticky actions stay at -v5's 0.25."""
    from ray.tune.registry import register_env

    def make(cfg):
        # In the env runner's process, which has not imported ale_py.
        import ale_py
        import gymnasium as gym
        from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

        gym.register_envs(ale_py)
        return wrap_atari_for_new_api_stack(gym.make(env_id, frameskip=1), dim=84, framestack=4)

    name = "rllib_" + env_id.replace("/", "_")
    register_env(name, make)
    return name


def _rllib_cnn(config):
    """The Nature DQN convolutions (as rlx picks for 84x84 frames), then a
    hidden layer of 256 for the policy and value heads, which share the
    convolutions (RLlib's default for an encoder)."""
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    filters = [[c, k, s, "valid"] for c, k, s in NATURE_CNN]
    return config.rl_module(model_config=DefaultModelConfig(
        conv_filters=filters, conv_activation="relu", head_fcnet_hiddens=[256]))


def rllib_sampling(args):
    from ray.rllib.algorithms.ppo import PPOConfig

    _ray_init()
    runners = args.runners
    atari = args.env.startswith("ALE/")
    env = _rllib_atari(args.env) if atari else args.env
    config = PPOConfig().environment(env, clip_rewards=atari or None)
    config = config.env_runners(num_env_runners=runners, num_envs_per_env_runner=args.envs)
    config = _rllib_cnn(config) if atari else _rllib_model(config, [64, 64], "tanh", False)
    algo = config.build()

    def sample_once():
        return sum(len(e) for e in _sample_episodes(algo, runners, STEPS_PER_SAMPLE))

    rates = _rates(sample_once, args.seconds)
    algo.stop()
    return {
        "env": args.env, "runners": runners, "envs_per_runner": args.envs,
        "samples": len(rates), "steps_per_s": rates[len(rates) // 2],
    }


def rllib_multi_agent_sampling(args):
    """RLlib's multi-agent env runners on its MultiAgentCartPole (one
    CartPole per agent), every agent under one shared policy or each
    under its own, PPO's 2x64 tanh model: agent steps per second."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
    from ray.tune.registry import register_env

    _ray_init()
    n, runners, envs = args.agents, args.runners, args.envs
    register_env("ma_cartpole", lambda cfg: MultiAgentCartPole(config={"num_agents": n}))
    if args.policies == "shared":
        policies, mapping = {"shared"}, (lambda aid, *a, **kw: "shared")
    else:
        policies, mapping = {f"p{i}" for i in range(n)}, (lambda aid, *a, **kw: f"p{aid}")
    config = (
        PPOConfig()
        .environment("ma_cartpole")
        .env_runners(num_env_runners=runners, num_envs_per_env_runner=envs)
        .multi_agent(policies=policies, policy_mapping_fn=mapping)
    )
    config = _rllib_model(config, [64, 64], "tanh", False)
    algo = config.build()
    # Env steps per call: at least STEPS_PER_SAMPLE agent steps, and never
    # fewer than 1000 env steps, so that a call's overhead is spread thin.
    env_steps = max(STEPS_PER_SAMPLE // n, 1000)

    def sample_once():
        return sum(e.agent_steps() for e in _sample_episodes(algo, runners, env_steps))

    rates = _rates(sample_once, args.seconds)
    algo.stop()
    return {
        "agents": n,
        "policies": args.policies,
        "runners": runners,
        "envs_per_runner": envs,
        "samples": len(rates),
        "agent_steps_per_s": rates[len(rates) // 2],
    }


def rllib_impala_atari(args):
    """RLlib's IMPALA on `ALE/<game>-v5` with RLlib's Atari preprocessing,
    `--runners` env runners x `--envs` envs, its Atari learning settings
    (rollouts of 50, batches of 500, lr 5e-4, entropy 0.01, grad clip 40),
    the Nature CNN, `--learners` learner actors (0: in the driver), for
    `--budget-s` seconds. The curve: one point per training iteration
    (RLlib's at least 10 s each)."""
    from ray.rllib.algorithms.impala import IMPALAConfig

    _ray_init()
    env = _rllib_atari(args.env)
    config = (
        IMPALAConfig()
        .environment(env, clip_rewards=True)
        .env_runners(num_env_runners=args.runners, num_envs_per_env_runner=args.envs, rollout_fragment_length=50)
        .learners(num_learners=args.learners)
        .training(train_batch_size_per_learner=500, lr=5e-4, entropy_coeff=0.01, grad_clip=40.0, vf_loss_coeff=0.5)
        .debugging(seed=args.seed)
    )
    algo = _rllib_cnn(config).build()
    curve, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < args.budget_s:
        result = algo.train()
        runners = result.get("env_runners", {})
        learners = result.get("learners", {}).get("__all_modules__", {})
        curve.append({
            "time_s": time.perf_counter() - t0,
            "agent_steps": runners.get("num_env_steps_sampled_lifetime", 0),
            "trained_steps": learners.get("num_env_steps_trained_lifetime", 0),
            "episodes": runners.get("num_episodes_lifetime", 0),
            "episode_reward_mean": runners.get("episode_return_mean", float("nan")),
        })
    algo.stop()
    last = curve[-1]
    return {
        "env": args.env, "runners": args.runners, "envs_per_runner": args.envs, "learners": args.learners,
        "agent_steps_per_s": last["agent_steps"] / last["time_s"], "curve": curve,
    }


def sb3_halfcheetah(args):
    """SB3's PPO or SAC (`--algo`) on HalfCheetah-v5 with the zoo's
    HalfCheetah hyperparameters (hyperparams/ppo.yml and sac.yml, written
    for -v3), for `--budget-s` seconds: the curve of the mean return of the
    last 100 training episodes (each 1,000 steps), every 5,000 env steps."""
    import torch.nn as nn
    from stable_baselines3 import PPO, SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    class Curve(BaseCallback):
        def __init__(self):
            super().__init__()
            self.points, self.next = [], 5_000

        def _on_step(self):
            elapsed = time.perf_counter() - self.t0
            if self.model.num_timesteps >= self.next or elapsed >= args.budget_s:
                self.next += 5_000
                buf = self.model.ep_info_buffer
                self.points.append({
                    "time_s": elapsed, "env_steps": self.model.num_timesteps, "episodes": self.model.num_timesteps // 1000,
                    "episode_reward_mean": sum(e["r"] for e in buf) / len(buf) if buf else float("nan"),
                })
            return elapsed < args.budget_s

    env = make_vec_env("HalfCheetah-v5", n_envs=1, seed=args.seed)
    if args.algo == "ppo":
        env = VecNormalize(env, gamma=0.98)
        model = PPO(
            "MlpPolicy", env, seed=args.seed, device="cpu",
            batch_size=64, n_steps=512, gamma=0.98, learning_rate=2.0633e-05, ent_coef=0.000401762,
            clip_range=0.1, n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096,
            policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU,
                               net_arch=dict(pi=[256, 256], vf=[256, 256])),
        )
    else:
        model = SAC("MlpPolicy", env, seed=args.seed, device="cpu", learning_starts=10_000)
    c = Curve()
    c.t0 = time.perf_counter()
    model.learn(total_timesteps=1_000_000, callback=c)
    last = c.points[-1]
    return {"algo": args.algo, "env_steps_per_s": last["env_steps"] / last["time_s"], "curve": c.points}


def _rllib_greedy_return(algo, env, episodes=10):
    """The mean return of `episodes` greedy episodes (the argmax of the
    module's action logits) on `env`."""
    import torch

    module = algo.get_module()
    total = 0.0
    for _ in range(episodes):
        obs, _ = env.reset()
        done = False
        while not done:
            with torch.no_grad():
                out = module.forward_inference({"obs": torch.as_tensor(obs[None], dtype=torch.float32)})
            obs, reward, terminated, truncated, _ = env.step(int(out["action_dist_inputs"][0].argmax()))
            total += reward
            done = terminated or truncated
    return total / episodes


def rllib_ppo(args):
    """RLlib's own tuned CartPole-v1 PPO example (tuned_examples/ppo/cartpole_ppo.py):
    with RLlib's default env runners (2 x 1 env, the example as shipped), or
    with `--runners` x `--envs` (the best on this machine is found by trying
    0/1/2 x 1/8). Both criteria, as `_sb3_solve`: the 100-episode training
    mean (RLlib's own window) and a greedy evaluation of 10 episodes every
    `--eval-every` env steps, inside the clock as SB3's."""
    import gymnasium as gym
    from ray.rllib.algorithms.ppo import PPOConfig

    _ray_init()
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(lr=0.0003, num_epochs=6, vf_loss_coeff=0.01)
        .debugging(seed=args.seed)
    )
    if args.runners >= 0:
        config = config.env_runners(num_env_runners=args.runners, num_envs_per_env_runner=args.envs)
    config = _rllib_model(config, [32], "linear", True)
    algo = config.build()
    eval_env = gym.make("CartPole-v1")
    eval_env.reset(seed=args.seed + 1000)
    return _rllib_until_solved(algo, args, SOLVE_RETURN, lambda: _rllib_greedy_return(algo, eval_env))


def _rllib_until_solved(algo, args, threshold, evaluate, min_episodes=0):
    """Trains `algo` until both criteria are met, or `--budget-s` seconds or
    `--budget-steps` env steps pass: RLlib's training mean (once
    `min_episodes` have ended) reaches `threshold`, and `evaluate()` (a
    greedy evaluation, every `--eval-every` env steps, inside the clock)
    does. Returns the result record with each criterion's steps and time."""
    t0 = time.perf_counter()
    best, best_eval, steps = float("-inf"), float("-inf"), 0
    train_at = eval_at = None
    next_eval = args.eval_every
    while True:
        result = algo.train()
        runners = result.get("env_runners", {})
        mean = runners.get("episode_return_mean", float("nan"))
        episodes = runners.get("num_episodes_lifetime", 0)
        steps = result.get("num_env_steps_sampled_lifetime", runners.get("num_env_steps_sampled_lifetime", 0))
        if mean == mean and episodes >= min_episodes:
            best = max(best, mean)
            if mean >= threshold and train_at is None:
                train_at = (steps, time.perf_counter() - t0)
        if steps >= next_eval:
            next_eval = steps + args.eval_every
            evaluation = evaluate()
            best_eval = max(best_eval, evaluation)
            if evaluation >= threshold and eval_at is None:
                eval_at = (steps, time.perf_counter() - t0)
        elapsed = time.perf_counter() - t0
        if (train_at and eval_at) or elapsed > args.budget_s or steps > args.budget_steps:
            break
    algo.stop()
    train = train_at or (steps, elapsed)
    result = _solve_result(train_at is not None, train[1], train[0], best)
    evaluation = eval_at or (steps, elapsed)
    result.update({
        "eval_solved": eval_at is not None, "eval_wall_s": evaluation[1], "eval_env_steps": int(evaluation[0]),
        "best_eval_return": best_eval, "eval_every": args.eval_every,
        "runners": "default" if args.runners < 0 else args.runners,
        "envs_per_runner": "default" if args.runners < 0 else args.envs,
    })
    return result


# RLlib's own examples for the cells beyond PPO, as in the Ray repository's
# `rllib/examples/algorithms/<algo>/` (the layout of the Ray 2.60 era):
# the env, the threshold (the zoo's, which the rlx side uses), and the
# example's settings. The env runners are the harness's `--runners` x
# `--envs` (-1: the algorithm's default).
def _rllib_example(algo):
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    if algo == "dqn":  # dqn/cartpole_dqn.py
        from ray.rllib.algorithms.dqn import DQNConfig

        config = DQNConfig().environment("CartPole-v1").training(
            lr=0.0005, train_batch_size_per_learner=32,
            replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50_000, "alpha": 0.6, "beta": 0.4},
            n_step=(2, 5), double_q=True, dueling=True, epsilon=[(0, 1.0), (25_000, 0.02)],
        ).rl_module(model_config=DefaultModelConfig(
            fcnet_hiddens=[256], fcnet_activation="tanh", fcnet_bias_initializer="zeros_",
            head_fcnet_hiddens=[256], head_fcnet_bias_initializer="zeros_",
        ))
        return config, "CartPole-v1", SOLVE_RETURN
    if algo == "appo":  # appo/cartpole_appo.py
        from ray.rllib.algorithms.appo import APPOConfig

        config = APPOConfig().environment("CartPole-v1").training(
            circular_buffer_iterations_per_batch=2, vf_loss_coeff=0.05, entropy_coeff=0.0,
        ).rl_module(model_config=DefaultModelConfig(vf_share_layers=True))
        return config, "CartPole-v1", SOLVE_RETURN
    if algo == "impala":  # impala/cartpole_impala.py
        from ray.rllib.algorithms.impala import IMPALAConfig
        from ray.rllib.connectors.env_to_module.mean_std_filter import MeanStdFilter

        config = IMPALAConfig().environment("CartPole-v1").env_runners(
            env_to_module_connector=lambda env, spaces, device: MeanStdFilter(),
        ).training(
            train_batch_size_per_learner=500, grad_clip=40.0, grad_clip_by="global_norm", lr=0.0005,
            vf_loss_coeff=0.05, entropy_coeff=0.0,
        ).rl_module(model_config=DefaultModelConfig(vf_share_layers=True))
        return config, "CartPole-v1", SOLVE_RETURN
    if algo == "sac":  # sac/pendulum_sac.py
        from torch import nn
        from ray.rllib.algorithms.sac.sac import SACConfig

        config = SACConfig().environment("Pendulum-v1").training(
            initial_alpha=1.001, actor_lr=2e-4, critic_lr=8e-4, alpha_lr=9e-4, lr=None, target_entropy="auto",
            n_step=(2, 5), tau=0.005, train_batch_size_per_learner=256, target_network_update_freq=1,
            replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer", "capacity": 100000, "alpha": 1.0, "beta": 0.0},
            num_steps_sampled_before_learning_starts=256,
        ).rl_module(model_config=DefaultModelConfig(
            fcnet_hiddens=[256, 256], fcnet_activation="relu", fcnet_kernel_initializer=nn.init.xavier_uniform_,
            head_fcnet_hiddens=[], head_fcnet_activation=None, head_fcnet_kernel_initializer="orthogonal_",
            head_fcnet_kernel_initializer_kwargs={"gain": 0.01}, fusionnet_hiddens=[256, 256, 256],
            fusionnet_activation="relu",
        )).reporting(metrics_num_episodes_for_smoothing=5)
        return config, "Pendulum-v1", -200.0
    raise SystemExit(f"no RLlib example for {algo}")


def rllib_solve(args):
    """RLlib's own example for `--algo` (DQN, APPO or IMPALA on CartPole-v1,
    SAC on Pendulum-v1), with both criteria as `rllib_ppo`: the training
    mean over RLlib's own window (100 episodes, 5 for SAC, as the example
    sets) once 20 episodes have ended, and a greedy evaluation of 10
    episodes (RLlib's own evaluation with `explore=False`, on a separate
    local env runner) every `--eval-every` env steps, inside the clock."""
    config, env_id, threshold = _rllib_example(args.algo)
    _ray_init()
    config = config.debugging(seed=args.seed).evaluation(
        # An interval out of reach: the eval env runner exists and this loop
        # calls `evaluate()` itself, on the env-step grid.
        evaluation_interval=10**9, evaluation_num_env_runners=0, evaluation_duration=10,
        evaluation_duration_unit="episodes", evaluation_config={"explore": False},
    )
    if args.runners >= 0:
        config = config.env_runners(num_env_runners=args.runners, num_envs_per_env_runner=args.envs)
    if args.algo in ("appo", "impala"):
        # `--learners` (default 0: the learner in the driver). The examples'
        # one remote learner beside 2 env runners asks Ray for 3 CPUs, and
        # on this 2-core machine `build()` waits for them forever.
        config = config.learners(num_learners=args.learners)
    algo = config.build()

    def evaluate():
        evaluation = algo.evaluate()
        return evaluation.get("evaluation", evaluation).get("env_runners", {}).get("episode_return_mean", float("-inf"))

    out = _rllib_until_solved(algo, args, threshold, evaluate, min_episodes=20)
    out.update({
        "algo": args.algo, "env": env_id, "threshold": threshold,
        "learners": args.learners if args.algo in ("appo", "impala") else "default",
    })
    return out


def _sb3_solve(args, algorithm, n_envs, n_timesteps, env_id="CartPole-v1", threshold=SOLVE_RETURN, normalize=False,
               **hyperparams):
    """Trains `algorithm` (SB3's PPO or DQN class) with the zoo's
    `hyperparams` on `n_envs` CartPole-v1 copies, on one torch thread, for at
    most the zoo's `n_timesteps`, and records both criteria: the first time
    the mean return of the last 100 training episodes reaches SOLVE_RETURN,
    and the first greedy evaluation (10 episodes, deterministic actions,
    every `--eval-every` env steps, as the zoo's EvalCallback) that does.

    `total_timesteps` must be the zoo's n_timesteps: SB3's schedules
    (DQN's `exploration_fraction`, PPO's linear learning rate and clip
    range) are fractions of it. An earlier version of this harness passed
    its step budget (1M) instead, which stretched DQN's ε decay from 8k to
    160k steps, and SB3's DQN never learned within 600 s.

    `normalize` is the zoo's `normalize: true`: `VecNormalize` over the
    training envs (observations and rewards, with the algorithm's γ, as
    the zoo's ExperimentManager passes it); the greedy evaluation sees
    observations normalized with the training statistics at that time
    and counts raw rewards, as the zoo's evaluation env does."""
    import gymnasium as gym
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize, sync_envs_normalization

    class Criteria(BaseCallback):
        def __init__(self):
            super().__init__()
            self.best, self.best_eval = float("-inf"), float("-inf")
            self.train_at = self.eval_at = None
            self.next_eval = args.eval_every
            self.eval_env = gym.make(env_id)
            self.eval_env.reset(seed=args.seed + 1000)
            if normalize:
                self.eval_env = VecNormalize(DummyVecEnv([lambda: self.eval_env]), training=False, norm_reward=False)

        def _on_step(self):
            now = (self.model.num_timesteps, time.perf_counter() - self.t0)
            buf = self.model.ep_info_buffer
            # The last 100 episodes, once 20 have ended (as rlx's window).
            if len(buf) >= 20:
                mean = sum(e["r"] for e in buf) / len(buf)
                self.best = max(self.best, mean)
                if mean >= threshold and self.train_at is None:
                    self.train_at = now
            if self.model.num_timesteps >= self.next_eval:
                self.next_eval += args.eval_every
                if normalize:
                    sync_envs_normalization(self.model.get_env(), self.eval_env)
                mean, _ = evaluate_policy(self.model, self.eval_env, n_eval_episodes=10, deterministic=True)
                self.best_eval = max(self.best_eval, mean)
                if mean >= threshold and self.eval_at is None:
                    self.eval_at = (self.model.num_timesteps, time.perf_counter() - self.t0)
            done = self.train_at is not None and self.eval_at is not None
            return not done and time.perf_counter() - self.t0 < args.budget_s

    torch.set_num_threads(1)
    env = make_vec_env(env_id, n_envs=n_envs, seed=args.seed)
    if normalize:
        env = VecNormalize(env, gamma=hyperparams.get("gamma", 0.99))
    model = algorithm("MlpPolicy", env, seed=args.seed, device="cpu", **hyperparams)
    c = Criteria()
    c.t0 = time.perf_counter()
    model.learn(total_timesteps=n_timesteps, callback=c)
    seconds = time.perf_counter() - c.t0
    train = c.train_at or (model.num_timesteps, seconds)
    result = _solve_result(c.train_at is not None, train[1], train[0], c.best)
    evaluation = c.eval_at or (model.num_timesteps, seconds)
    result.update({
        "eval_solved": c.eval_at is not None, "eval_wall_s": evaluation[1], "eval_env_steps": int(evaluation[0]),
        "best_eval_return": c.best_eval, "eval_every": args.eval_every, "zoo_n_timesteps": n_timesteps,
    })
    return result


def _linear(start):
    return lambda progress: progress * start


def sb3_ppo(args):
    # rl-baselines3-zoo's tuned CartPole-v1 hyperparameters (hyperparams/ppo.yml).
    from stable_baselines3 import PPO

    return _sb3_solve(
        args, PPO, n_envs=8, n_timesteps=100_000,
        n_steps=32, batch_size=256, n_epochs=20,
        gamma=0.98, gae_lambda=0.8, ent_coef=0.0,
        learning_rate=_linear(0.001), clip_range=_linear(0.2),
    )


def sb3_dqn(args):
    # rl-baselines3-zoo's tuned CartPole-v1 hyperparameters (hyperparams/dqn.yml).
    from stable_baselines3 import DQN

    return _sb3_solve(
        args, DQN, n_envs=1, n_timesteps=50_000, policy_kwargs={"net_arch": [256, 256]},
        learning_rate=2.3e-3, batch_size=64, gamma=0.99,
        buffer_size=100_000, learning_starts=1000, train_freq=256, gradient_steps=128,
        target_update_interval=10, exploration_fraction=0.16, exploration_final_eps=0.04,
    )


def sb3_a2c(args):
    # rl-baselines3-zoo's tuned CartPole-v1 hyperparameters (hyperparams/a2c.yml).
    from stable_baselines3 import A2C

    return _sb3_solve(args, A2C, n_envs=8, n_timesteps=500_000, ent_coef=0.0)


def sb3_sac_pendulum(args):
    # rl-baselines3-zoo's tuned Pendulum-v1 hyperparameters (hyperparams/sac.yml);
    # solved at a mean return of -200.
    from stable_baselines3 import SAC

    return _sb3_solve(args, SAC, n_envs=1, n_timesteps=20_000, env_id="Pendulum-v1", threshold=-200.0, learning_rate=1e-3)


def _sb3_deterministic_pendulum(args, algorithm):
    # rl-baselines3-zoo's tuned Pendulum-v1 hyperparameters, the same in
    # hyperparams/td3.yml and ddpg.yml; solved at a mean return of -200.
    import numpy as np
    from stable_baselines3.common.noise import NormalActionNoise

    return _sb3_solve(
        args, algorithm, n_envs=1, n_timesteps=20_000, env_id="Pendulum-v1", threshold=-200.0,
        gamma=0.98, buffer_size=200_000, learning_starts=10_000,
        action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
        gradient_steps=1, train_freq=1, learning_rate=1e-3, policy_kwargs={"net_arch": [400, 300]},
    )


def sb3_td3_pendulum(args):
    from stable_baselines3 import TD3

    return _sb3_deterministic_pendulum(args, TD3)


def sb3_ddpg_pendulum(args):
    from stable_baselines3 import DDPG

    return _sb3_deterministic_pendulum(args, DDPG)


# Acrobot-v1 is solved at a mean return of -100 (Gymnasium's reward_threshold).
ACROBOT_SOLVED = -100.0


def sb3_ppo_acrobot(args):
    # rl-baselines3-zoo's tuned Acrobot-v1 hyperparameters (hyperparams/ppo.yml).
    from stable_baselines3 import PPO

    return _sb3_solve(
        args, PPO, n_envs=16, n_timesteps=1_000_000, env_id="Acrobot-v1", threshold=ACROBOT_SOLVED, normalize=True,
        n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4, ent_coef=0.0,
    )


def sb3_a2c_acrobot(args):
    # rl-baselines3-zoo's tuned Acrobot-v1 hyperparameters (hyperparams/a2c.yml).
    from stable_baselines3 import A2C

    return _sb3_solve(
        args, A2C, n_envs=16, n_timesteps=500_000, env_id="Acrobot-v1", threshold=ACROBOT_SOLVED, normalize=True,
        ent_coef=0.0,
    )


def sb3_dqn_acrobot(args):
    # rl-baselines3-zoo's tuned Acrobot-v1 hyperparameters (hyperparams/dqn.yml).
    from stable_baselines3 import DQN

    return _sb3_solve(
        args, DQN, n_envs=1, n_timesteps=100_000, env_id="Acrobot-v1", threshold=ACROBOT_SOLVED,
        learning_rate=6.3e-4, batch_size=128, buffer_size=50_000, learning_starts=0, gamma=0.99,
        target_update_interval=250, train_freq=4, gradient_steps=-1,
        exploration_fraction=0.12, exploration_final_eps=0.1, policy_kwargs={"net_arch": [256, 256]},
    )


def sb3_dqn_mountaincar(args):
    # rl-baselines3-zoo's tuned MountainCar-v0 hyperparameters (hyperparams/dqn.yml);
    # solved at a mean return of -110 (Gymnasium's reward_threshold).
    from stable_baselines3 import DQN

    return _sb3_solve(
        args, DQN, n_envs=1, n_timesteps=120_000, env_id="MountainCar-v0", threshold=-110.0,
        learning_rate=4e-3, batch_size=128, buffer_size=10_000, learning_starts=1000, gamma=0.98,
        target_update_interval=600, train_freq=16, gradient_steps=8,
        exploration_fraction=0.2, exploration_final_eps=0.07, policy_kwargs={"net_arch": [256, 256]},
    )


def _solve_result(solved, seconds, steps, best):
    return {"solved": bool(solved), "wall_s": seconds, "env_steps": int(steps), "best_mean_return": best}


WORKLOADS = {
    "raw_cartpole": raw_cartpole,
    "rllib_sampling": rllib_sampling,
    "rllib_ppo": rllib_ppo,
    "rllib_solve": rllib_solve,
    "rllib_multi_agent_sampling": rllib_multi_agent_sampling,
    "sb3_ppo": sb3_ppo,
    "sb3_dqn": sb3_dqn,
    "sb3_a2c": sb3_a2c,
    "sb3_sac_pendulum": sb3_sac_pendulum,
    "sb3_td3_pendulum": sb3_td3_pendulum,
    "sb3_ddpg_pendulum": sb3_ddpg_pendulum,
    "sb3_ppo_acrobot": sb3_ppo_acrobot,
    "sb3_a2c_acrobot": sb3_a2c_acrobot,
    "sb3_dqn_acrobot": sb3_dqn_acrobot,
    "sb3_dqn_mountaincar": sb3_dqn_mountaincar,
    "rllib_impala_atari": rllib_impala_atari,
    "sb3_halfcheetah": sb3_halfcheetah,
}


# ---------------------------------------------------------------- the parent


def tree_rss(proc):
    import psutil

    total = 0
    try:
        procs = [proc] + proc.children(recursive=True)
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_child(name, extra, timeout_s):
    """Runs one workload in a child process; returns its JSON and peak tree RSS."""
    import psutil

    cmd = [sys.executable, os.path.abspath(__file__), "--workload", name] + extra
    print(f"[harness] {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    proc = psutil.Process(child.pid)
    peak, t0 = 0, time.perf_counter()
    while child.poll() is None:
        peak = max(peak, tree_rss(proc))
        if time.perf_counter() - t0 > timeout_s:
            os.killpg(child.pid, 9)
            break
        time.sleep(0.05)
    stdout, _ = child.communicate()
    # Ray leaves daemons behind when a driver dies: clear the session's group.
    try:
        os.killpg(child.pid, 9)
    except ProcessLookupError:
        pass
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        return {"error": f"exit status {child.returncode}", "peak_rss_bytes": peak}
    result = json.loads(lines[-1])
    result["peak_rss_bytes"] = peak
    print(f"[harness]   -> {result}", file=sys.stderr, flush=True)
    return result


def versions():
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for key, dist in [("ray", "ray"), ("gymnasium", "gymnasium"), ("stable_baselines3", "stable-baselines3"), ("torch", "torch")]:
        try:
            out[key] = version(dist)
        except PackageNotFoundError:
            out[key] = "not installed"
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="where to write the JSON (default: stdout)")
    p.add_argument("--only", help="comma-separated workloads to run (default: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seconds", type=float, default=10.0, help="measuring time per throughput workload")
    p.add_argument("--budget-s", type=float, default=600.0, help="wall-clock budget per solve run")
    p.add_argument("--budget-steps", type=int, default=1_000_000, help="env-step budget per solve run")
    p.add_argument("--eval-every", type=int, default=10_000, help="env steps between SB3's greedy evaluations")
    p.add_argument("--runners", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--envs", type=int, default=8, help=argparse.SUPPRESS)
    p.add_argument("--env", default="CartPole-v1", help="rllib_sampling's env: CartPole-v1 or ALE/<Game>-v5")
    p.add_argument("--learners", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--algo", choices=["ppo", "sac", "dqn", "appo", "impala"], default="sac", help=argparse.SUPPRESS)
    p.add_argument("--agents", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--policies", choices=["shared", "per_agent"], default="shared", help=argparse.SUPPRESS)
    p.add_argument("--workload", choices=sorted(WORKLOADS), help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.workload:
        print(json.dumps(WORKLOADS[args.workload](args)), flush=True)
        return

    only = set(args.only.split(",")) if args.only else None
    unknown = (only or set()) - set(WORKLOADS)
    if unknown:
        p.error(f"unknown workload(s) {sorted(unknown)}; known: {sorted(WORKLOADS)}")
    common = ["--seed", str(args.seed), "--seconds", str(args.seconds)]
    common += ["--budget-s", str(args.budget_s), "--budget-steps", str(args.budget_steps)]
    common += ["--eval-every", str(args.eval_every)]
    timeout = args.budget_s + 300
    report = {
        "side": "reference",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "versions": versions(),
        "settings": {"seed": args.seed, "seconds": args.seconds, "budget_s": args.budget_s, "budget_steps": args.budget_steps},
        "workloads": {},
    }
    w = report["workloads"]
    if not only or "raw_cartpole" in only:
        w["raw_cartpole"] = run_child("raw_cartpole", common, timeout)
    if not only or "rllib_sampling" in only:
        for runners in [0, 1, 2]:
            extra = ["--runners", str(runners), "--env", args.env, "--envs", str(args.envs)]
            w[f"sampling_{runners}"] = run_child("rllib_sampling", common + extra, timeout)
    if only and "rllib_impala_atari" in only:
        extra = ["--env", args.env, "--runners", str(max(args.runners, 1)), "--envs", str(args.envs)]
        w["impala_atari"] = run_child("rllib_impala_atari", common + extra + ["--learners", str(args.learners)], timeout)
    if only and "sb3_halfcheetah" in only:
        w[f"{args.algo}_halfcheetah"] = run_child("sb3_halfcheetah", common + ["--algo", args.algo], timeout)
    if only and "rllib_multi_agent_sampling" in only:
        # Every configuration of env runners and env copies; the table
        # takes the best per agent count and mapping.
        for agents in [2, 8, 32]:
            for policies in ["shared", "per_agent"]:
                for runners in [0, 1, 2]:
                    for envs in [1, 8]:
                        extra = ["--agents", str(agents), "--policies", policies, "--runners", str(runners)]
                        key = f"multi_agent_{agents}_{policies}_{runners}x{envs}"
                        w[key] = run_child("rllib_multi_agent_sampling", common + extra + ["--envs", str(envs)], timeout)
    # RLlib's PPO twice: with its best env runners on this machine (2 x 8,
    # found by trying 0/1/2 x 1/8 on 2026-11-26; see the book's Learning
    # quality page) and as its tuned example ships (RLlib's default runners).
    solves = [
        ("rllib_ppo", "rllib_ppo_solve", ["--runners", "2", "--envs", "8"]),
        ("rllib_ppo", "rllib_ppo_shipped_solve", []),
        ("sb3_ppo", "sb3_ppo_solve", []),
        ("sb3_dqn", "sb3_dqn_solve", []),
    ]
    for name, key, extra in solves:
        if not only or name in only:
            w[key] = run_child(name, common + extra, timeout)

    text = json.dumps(report, indent=2)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
