"""Does RLlib's offline API read rlx's Parquet files? RLlib's BC (new API
stack, Ray Data's read_parquet, rows as RLlib's Columns) trains on a
dataset directory rlx wrote (`output_format: parquet`), and evaluates
greedy on the env.

    python benches/offline/rllib_reads_rlx.py <dataset dir> <env> [iterations]

Prints one line per iteration: the rows trained on and the evaluation's
mean return. Needs ray[rllib] and torch.
"""
import os
import sys

import ray
from ray.rllib.algorithms.bc import BCConfig

data, env = os.path.abspath(sys.argv[1]), sys.argv[2]
iterations = int(sys.argv[3]) if len(sys.argv) > 3 else 10
files = [os.path.join(data, f) for f in sorted(os.listdir(data)) if f.endswith(".parquet")]
# Logical CPUs: with 2, the learner and the env runner hold both and Ray
# Data's OfflinePreLearner actors wait for ever.
ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)
config = (
    BCConfig()
    .environment(env)
    .offline_data(
        input_=files,
        input_read_method="read_parquet",
        input_read_episodes=False,
        dataset_num_iters_per_learner=1,
    )
    .training(train_batch_size_per_learner=2000, lr=1e-3)
    .evaluation(
        evaluation_interval=1,
        evaluation_duration=10,
        evaluation_num_env_runners=0,
        evaluation_config=BCConfig.overrides(explore=False),
    )
)
algo = config.build_algo()
for i in range(iterations):
    r = algo.train()
    ev = r.get("evaluation", {}).get("env_runners", {}).get("episode_return_mean")
    print(i + 1, r.get("learners", {}).get("default_policy", {}).get("num_module_steps_trained_lifetime"), ev, flush=True)
ray.shutdown()
