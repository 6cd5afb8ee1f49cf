"""RLlib's DreamerV3 beside rlx's on the same task and the same settings:
env steps and wall seconds to a greedy criterion, with RLlib's own greedy
evaluation (`explore: False`, 10 episodes) every 1,000 env steps, as
benches/dreamer_v3/env_steps.sh evaluates rlx.

    python benches/dreamer_v3/rllib_side.py cartpole|pendulum OUT.jsonl [--seed N]
        [--model-size micro] [--training-ratio 256] [--batch-size-B 16]
        [--batch-length-T 32] [--budget 30000] [--hours 2.5]

Defaults are rlx's tuned examples (tuned_examples/dreamerv3-*.yaml):
`micro`, 16 x 32 sequences, a training ratio of 256; RLlib's own tuned
examples use `XS` and 1024 (`--model-size XS --training-ratio 1024
--batch-length-T 64`). Stops at the criterion (greedy 475 on CartPole-v1,
-200 on Pendulum-v1), at `--budget` env steps or after `--hours`.

RLlib 2.60 made one update per env step at a training ratio of 256 with
16 x 32 sequences (1,000 updates per 1,000 env steps in its results),
where 256 asks for one every two env steps: compare it with rlx at 512.
Beside other work, run it with OMP_NUM_THREADS=1: torch's two threads
on two busy cores ran 14x slower.

Writes one JSON line per evaluation to OUT.jsonl: env steps, gradient
updates, wall seconds since the start (with and without the evaluations;
rlx's `time_total_s` counts its evaluations), and the greedy mean return.
Needs ray[rllib] (2.60 was used), torch and pillow.
"""
import argparse
import json
import time

import ray
from ray.rllib.algorithms.dreamerv3 import DreamerV3Config

TASKS = {"cartpole": ("CartPole-v1", 475.0), "pendulum": ("Pendulum-v1", -200.0)}

p = argparse.ArgumentParser()
p.add_argument("task", choices=TASKS)
p.add_argument("out")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--model-size", default="micro")
p.add_argument("--training-ratio", type=float, default=256)
p.add_argument("--batch-size-B", type=int, default=16)
p.add_argument("--batch-length-T", type=int, default=32)
p.add_argument("--budget", type=int, default=30000)
p.add_argument("--hours", type=float, default=2.5)
p.add_argument("--every", type=int, default=1000, help="env steps between greedy evaluations")
args = p.parse_args()
env, goal = TASKS[args.task]

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
config = (
    DreamerV3Config()
    .environment(env)
    .training(
        model_size=args.model_size,
        training_ratio=args.training_ratio,
        batch_size_B=args.batch_size_B,
        batch_length_T=args.batch_length_T,
    )
    .evaluation(
        evaluation_interval=None,
        evaluation_duration=10,
        evaluation_duration_unit="episodes",
        evaluation_config={"explore": False},
    )
    .debugging(seed=args.seed)
)
algo = config.build_algo()

start = time.time()
evaluating = 0.0
next_eval = args.every
with open(args.out, "w") as out:
    while True:
        result = algo.train()
        steps = result["env_runners"]["num_env_steps_sampled_lifetime"]
        if steps < next_eval:
            if time.time() - start > args.hours * 3600:
                break
            continue
        next_eval = (steps // args.every + 1) * args.every
        t0 = time.time()
        ev = algo.evaluate()
        evaluating += time.time() - t0
        greedy = ev["env_runners"]["episode_return_mean"]
        row = {
            "env_steps": steps,
            "updates": result.get("num_grad_updates_lifetime"),
            "seconds": round(time.time() - start, 1),
            "seconds_training": round(time.time() - start - evaluating, 1),
            "greedy": greedy,
        }
        out.write(json.dumps(row) + "\n")
        out.flush()
        print(row, flush=True)
        if greedy >= goal or steps >= args.budget or time.time() - start > args.hours * 3600:
            break
algo.stop()
ray.shutdown()
