"""Does RLlib's offline API read rlx's Parquet files, and what does it
learn from them? RLlib's BC or CQL (new API stack, Ray Data's
read_parquet, rows as RLlib's Columns) trains on a dataset directory rlx
wrote (`output_format: parquet`), and evaluates greedy on the env.

    python benches/offline/rllib_reads_rlx.py <dataset dir> <env> [iterations]
        [--algo BC|CQL] [--seed N] [--out FILE]

BC: 2,000 rows an iteration at 1e-3 (rlx's MARWIL batch), 10 greedy
episodes after each. CQL: rlx's settings where RLlib has the key (64x64
ReLU networks, batches of 256, learning rates 1e-3, a fixed conservative
weight of 5 with 10 drawn actions, no Lagrange multiplier, no behaviour
cloning warm-up), 2,000 updates an iteration, 20 greedy episodes after
each (d3rlpy_side.py's schedule).

Prints one line per iteration: the iteration, the rows (BC) or updates
(CQL) so far, the evaluation's mean return and the seconds of training;
with --out also writes them as JSON. Needs ray[rllib] and torch.
"""
import argparse
import json
import os
import time

import ray
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.algorithms.cql import CQLConfig

p = argparse.ArgumentParser()
p.add_argument("data")
p.add_argument("env")
p.add_argument("iterations", type=int, nargs="?", default=10)
p.add_argument("--algo", choices=["BC", "CQL"], default="BC")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--updates", type=int, default=2000, help="CQL: updates per iteration")
p.add_argument("--out")
args = p.parse_args()

data = os.path.abspath(args.data)
files = [os.path.join(data, f) for f in sorted(os.listdir(data)) if f.endswith(".parquet")]
# Logical CPUs: with 2, the learner and the env runner hold both and Ray
# Data's OfflinePreLearner actors wait for ever.
ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)
if args.algo == "BC":
    config = BCConfig().training(train_batch_size_per_learner=2000, lr=1e-3)
    per_iteration, episodes = 1, 10
else:
    per_iteration, episodes = args.updates, 20
    config = (
        CQLConfig()
        .training(
            train_batch_size_per_learner=256,
            lr=None,
            actor_lr=1e-3,
            critic_lr=1e-3,
            alpha_lr=1e-3,
            initial_alpha=1.0,
            twin_q=True,
            n_step=1,
            bc_iters=0,
            num_actions=10,
            min_q_weight=5.0,
            lagrangian=False,
        )
        .rl_module(model_config={"fcnet_hiddens": [64, 64], "fcnet_activation": "relu", "head_fcnet_hiddens": []})
    )
config = (
    config.environment(args.env)
    .debugging(seed=args.seed)
    .offline_data(
        input_=files,
        input_read_method="read_parquet",
        input_read_episodes=False,
        dataset_num_iters_per_learner=per_iteration,
    )
    .evaluation(
        evaluation_interval=1,
        evaluation_duration=episodes,
        evaluation_num_env_runners=0,
        evaluation_config=type(config).overrides(explore=False),
    )
)
algo = config.build_algo()
lines = []
for i in range(args.iterations):
    start = time.perf_counter()
    r = algo.train()
    seconds = time.perf_counter() - start
    ev = r.get("evaluation", {}).get("env_runners", {}).get("episode_return_mean")
    done = r.get("learners", {}).get("default_policy", {}).get("num_module_steps_trained_lifetime")
    if args.algo == "CQL":
        done = (i + 1) * per_iteration
    lines.append({"iteration": i + 1, "trained": done, "evaluation": ev, "seconds": seconds})
    print(i + 1, done, ev, round(seconds, 1), flush=True)
if args.out:
    with open(args.out, "w") as f:
        json.dump({"library": "ray " + ray.__version__, "algorithm": args.algo, "seed": args.seed,
                   "env": args.env, "iterations": lines}, f, indent=1)
ray.shutdown()
