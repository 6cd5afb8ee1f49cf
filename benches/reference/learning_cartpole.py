#!/usr/bin/env python3
"""PPO and DQN on CartPole-v1, rlx against Stable-Baselines3, both
criteria, several seeds, interleaved in one sitting.

For each seed in turn it runs rlx PPO, SB3 PPO, rlx DQN and SB3 DQN, and
records for each run:

* the first time the mean return of the last 100 training episodes reaches
  475 (env steps, wall seconds);
* the first greedy evaluation of 10 episodes, every ~10k env steps, that
  reaches 475 (rlx: `evaluation_interval: 10`, 10 iterations of 1,024 (PPO)
  or 1,000 (DQN) env steps; SB3: the harness's EvalCallback-style check
  every 10,000 steps).

rlx runs its defaults; SB3 runs rl-baselines3-zoo's tuned hyperparameters
within the zoo's n_timesteps (harness.py's `sb3_ppo`, `sb3_dqn`). Every raw
file is kept: rlx's run directories and one JSON per SB3 run under --out,
and `summary.json` with the medians and ranges.

    target/python-bench/bin/python benches/reference/learning_cartpole.py \\
        --rlx target/release/rlx --out benches/reference/results/learning-cartpole-<date>
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
THRESHOLD = 475.0


def rlx_run(rlx, algorithm, seed, out):
    runs = os.path.join(out, "rlx-runs", f"{algorithm}-seed{seed}")
    config = json.dumps({"evaluation_interval": 10, "evaluation_duration": 10})
    stop = json.dumps({"episode_reward_mean": THRESHOLD, "timesteps_total": 1_000_000})
    cmd = [rlx, "train", "--run", algorithm, "--env", "CartPole-v1", "--seed", str(seed),
           "--config", config, "--stop", stop, "--results-dir", runs]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = os.path.join(runs, sorted(os.listdir(runs))[-1])
    results = [json.loads(line) for line in open(os.path.join(run_dir, "result.json"))]
    train = next((r for r in results if (r["episode_reward_mean"] or 0) >= THRESHOLD), None)
    evaluation = next((r for r in results if r.get("evaluation", {}).get("episode_reward_mean", 0) >= THRESHOLD), None)
    last = results[-1]
    return {
        "side": "rlx", "algorithm": algorithm, "seed": seed, "run_dir": os.path.relpath(run_dir, out),
        "solved": train is not None,
        "env_steps": (train or last)["timesteps_total"], "wall_s": (train or last)["time_total_s"],
        "eval_solved": evaluation is not None,
        "eval_env_steps": (evaluation or last)["timesteps_total"], "eval_wall_s": (evaluation or last)["time_total_s"],
    }


def sb3_run(python, algorithm, seed, out):
    workload = {"PPO": "sb3_ppo", "DQN": "sb3_dqn"}[algorithm]
    cmd = [python, os.path.join(HERE, "harness.py"), "--workload", workload, "--seed", str(seed), "--budget-s", "900"]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result = json.loads([line for line in text.splitlines() if line.startswith("{")][-1])
    result.update({"side": "sb3", "algorithm": algorithm, "seed": seed})
    with open(os.path.join(out, f"sb3-{algorithm}-seed{seed}.json"), "w") as f:
        json.dump(result, f, indent=2)
    return result


def summarize(runs):
    rows = []
    for algorithm in ["PPO", "DQN"]:
        for side in ["rlx", "sb3"]:
            mine = [r for r in runs if r["algorithm"] == algorithm and r["side"] == side]
            row = {"algorithm": algorithm, "side": side, "seeds": [r["seed"] for r in mine]}
            for criterion, solved, steps, wall in [("train", "solved", "env_steps", "wall_s"),
                                                   ("eval", "eval_solved", "eval_env_steps", "eval_wall_s")]:
                ok = [r for r in mine if r[solved]]
                row[criterion] = {
                    "solved": f"{len(ok)}/{len(mine)}",
                    "env_steps_median": statistics.median(r[steps] for r in ok) if ok else None,
                    "env_steps_range": [min(r[steps] for r in ok), max(r[steps] for r in ok)] if ok else None,
                    "wall_s_median": statistics.median(r[wall] for r in ok) if ok else None,
                    "wall_s_range": [min(r[wall] for r in ok), max(r[wall] for r in ok)] if ok else None,
                }
            rows.append(row)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rlx", required=True, help="the rlx binary (a release build)")
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", default="1,2,3")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for algorithm in ["PPO", "DQN"]:
            for side in ["rlx", "sb3"]:
                t0 = time.time()
                r = rlx_run(args.rlx, algorithm, seed, args.out) if side == "rlx" else sb3_run(sys.executable, algorithm, seed, args.out)
                runs.append(r)
                print(f"{side} {algorithm} seed {seed} ({time.time() - t0:.0f} s): {json.dumps(r)}", flush=True)
    from importlib.metadata import version
    summary = {
        "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
        "versions": {k: version(k) for k in ["stable-baselines3", "torch", "gymnasium"]},
        "runs": runs, "summary": summarize(runs),
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    for row in summary["summary"]:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
