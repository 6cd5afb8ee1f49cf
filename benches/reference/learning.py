#!/usr/bin/env python3
"""Cells of the learning-quality table (an algorithm on an env), rlx
against Stable-Baselines3, both criteria, several seeds, interleaved in one
sitting: `--cells ppo-cartpole,dqn-cartpole` (the default), `a2c-cartpole`,
`sac-pendulum`, `td3-pendulum`, `ddpg-pendulum`, `ppo-acrobot`,
`a2c-acrobot`, `dqn-acrobot` (Acrobot-v1 is solved at -100),
`dqn-mountaincar` (MountainCar-v0, at -110), and against RLlib only
`appo-cartpole` and `impala-cartpole`.

For each seed in turn it runs each cell's rlx and SB3 runs, and records for
each run:

* the first time the mean return of the last 100 training episodes (once
  20 have ended) reaches the threshold (env steps, wall seconds);
* the first greedy evaluation of 10 episodes, every ~10k env steps (2k for
  Pendulum), that reaches it (rlx: `evaluation_interval` in iterations,
  e.g. 10 of 1,024 (PPO) or 1,000 (DQN) env steps; SB3: the harness's
  EvalCallback-style check).

rlx runs its defaults; SB3 runs rl-baselines3-zoo's tuned hyperparameters
within the zoo's n_timesteps (harness.py's `sb3_ppo`, `sb3_dqn`). Every raw
file is kept: rlx's run directories and one JSON per SB3 run under --out,
and `summary.json` with the medians and ranges.

`--sides` picks who runs (default `rlx,sb3`): also `rlx-tuned` (rlx with
its tuned example, `tuned_examples/<cell>.yaml`, e.g. `ppo-acrobot.yaml`) and,
for PPO, DQN, APPO and IMPALA on CartPole and SAC on Pendulum, RLlib's own
example as `rllib-default` (as shipped: the example's env runners) or
`rllib-RxE` (R env runners x E envs each, e.g. `rllib-0x8`), harness.py's
`rllib_ppo` and `rllib_solve`.

    target/python-bench/bin/python benches/reference/learning.py \\
        --rlx target/release/rlx --out benches/reference/results/learning-cartpole-<date>
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Each cell: rlx's algorithm, the env, the threshold, rlx's evaluation
# interval in iterations (about `eval_every` env steps), the SB3 workload of
# harness.py, SB3's evaluation period in env steps, and rlx's step budget.
CELLS = {
    "ppo-cartpole": ("PPO", "CartPole-v1", 475.0, 10, "sb3_ppo", 10_000, 1_000_000),
    "dqn-cartpole": ("DQN", "CartPole-v1", 475.0, 10, "sb3_dqn", 10_000, 1_000_000),
    "a2c-cartpole": ("A2C", "CartPole-v1", 475.0, 40, "sb3_a2c", 10_000, 1_000_000),
    "sac-pendulum": ("SAC", "Pendulum-v1", -200.0, 2, "sb3_sac_pendulum", 2_000, 60_000),
    "td3-pendulum": ("TD3", "Pendulum-v1", -200.0, 2, "sb3_td3_pendulum", 2_000, 60_000),
    "ddpg-pendulum": ("DDPG", "Pendulum-v1", -200.0, 2, "sb3_ddpg_pendulum", 2_000, 60_000),
    "ppo-acrobot": ("PPO", "Acrobot-v1", -100.0, 10, "sb3_ppo_acrobot", 10_000, 1_000_000),
    "a2c-acrobot": ("A2C", "Acrobot-v1", -100.0, 40, "sb3_a2c_acrobot", 10_000, 1_000_000),
    "dqn-acrobot": ("DQN", "Acrobot-v1", -100.0, 10, "sb3_dqn_acrobot", 10_000, 300_000),
    "dqn-mountaincar": ("DQN", "MountainCar-v0", -110.0, 10, "sb3_dqn_mountaincar", 10_000, 300_000),
    # No SB3 counterpart (RLlib's side only): 2 iterations of 4,096 env steps.
    "appo-cartpole": ("APPO", "CartPole-v1", 475.0, 2, None, 10_000, 1_000_000),
    "impala-cartpole": ("IMPALA", "CartPole-v1", 475.0, 2, None, 10_000, 1_000_000),
}

# The cells with an RLlib side: harness.py's `rllib_ppo` for PPO (RLlib's
# tuned CartPole example), `rllib_solve --algo <algo>` for the others
# (RLlib's own example for that algorithm and env).
RLLIB_CELLS = {"ppo-cartpole", "dqn-cartpole", "appo-cartpole", "impala-cartpole", "sac-pendulum"}


# rlx's tuned example of a cell (`rlx-tuned`): `rlx train -f` runs it, with
# the cell's evaluation settings, seed and stop criteria.
def tuned_example(cell):
    return os.path.join(HERE, "..", "..", "tuned_examples", f"{cell}.yaml")


def rlx_run(rlx, cell, seed, out, tuned=False):
    algorithm, env, threshold, interval, _, _, budget = CELLS[cell]
    name = f"{algorithm}-{env}-seed{seed}" if cell != f"{algorithm.lower()}-cartpole" else f"{algorithm}-seed{seed}"
    runs = os.path.join(out, "rlx-tuned-runs" if tuned else "rlx-runs", name)
    # A tuned example may set its own evaluation interval (about every 10k
    # env steps, on its own iteration size); the cell's is for the defaults.
    settings = {"evaluation_interval": interval, "evaluation_duration": 10}
    if tuned and "evaluation_interval:" in open(tuned_example(cell)).read():
        del settings["evaluation_interval"]
    config = json.dumps(settings)
    # Both criteria are recorded, so the run goes on until both are met (or
    # the budget is spent): rlx's stop criteria end a run at the first one
    # reached, so they are set out of reach (overriding a tuned example's
    # own) and this script interrupts the run (SIGINT: rlx finishes the
    # iteration, writes it and exits) once result.json shows both, as the
    # SB3 side's callback does.
    stop = json.dumps({"episode_reward_mean": 1e12, "evaluation/episode_reward_mean": 1e12, "timesteps_total": budget})
    what = ["-f", tuned_example(cell)] if tuned else ["--run", algorithm, "--env", env]
    cmd = [rlx, "train", *what, "--seed", str(seed), "--config", config, "--stop", stop, "--results-dir", runs]
    low = float("-inf")

    def criteria(results):
        train = next((r for r in results if r["episodes_total"] >= 20 and (r["episode_reward_mean"] or low) >= threshold), None)
        evaluation = next((r for r in results if r.get("evaluation", {}).get("episode_reward_mean", low) >= threshold), None)
        return train, evaluation

    def read(run_dir):
        path = os.path.join(run_dir, "result.json")
        text = open(path).read() if os.path.exists(path) else ""
        # Only whole lines: the last may be half written while rlx runs.
        return [json.loads(line) for line in text.split("\n")[:-1] if line]

    def listing():
        return set(os.listdir(runs)) if os.path.isdir(runs) else set()

    # This run's directory is the one that appears after the start (an
    # earlier run's may be there when --out is reused).
    before = listing()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = None
    try:
        while proc.poll() is None:
            time.sleep(0.2)
            if run_dir is None and listing() - before:
                run_dir = os.path.join(runs, sorted(listing() - before)[-1])
            if run_dir is not None and all(criteria(read(run_dir))):
                proc.send_signal(signal.SIGINT)
                break
        status = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    if status not in (0, 130):
        raise SystemExit(f"{' '.join(cmd)} failed with exit status {status}")
    run_dir = os.path.join(runs, sorted(listing() - before)[-1])
    results = read(run_dir)
    train, evaluation = criteria(results)
    last = results[-1]
    return {
        "side": "rlx-tuned" if tuned else "rlx", "cell": cell, "algorithm": algorithm, "seed": seed, "run_dir": os.path.relpath(run_dir, out),
        "solved": train is not None,
        "env_steps": (train or last)["timesteps_total"], "wall_s": (train or last)["time_total_s"],
        "eval_solved": evaluation is not None,
        "eval_env_steps": (evaluation or last)["timesteps_total"], "eval_wall_s": (evaluation or last)["time_total_s"],
    }


def sb3_run(python, cell, seed, out, budget_s):
    _, _, _, _, workload, eval_every, _ = CELLS[cell]
    if workload is None:
        raise SystemExit(f"sb3: the {cell} cell has no SB3 counterpart")
    return harness_run(python, ["--workload", workload, "--budget-s", str(budget_s), "--eval-every", str(eval_every)],
                       "sb3", cell, seed, out)


def harness_run(python, args, side, cell, seed, out):
    """One reference run: harness.py with `args` and `--seed`; its result,
    labelled with the side, cell and seed, is returned and written to
    `out` (`<side>-<algorithm>-seed<N>.json` for CartPole's cells,
    `<side>-<cell>-seed<N>.json` for the others)."""
    algorithm = CELLS[cell][0]
    cmd = [python, os.path.join(HERE, "harness.py"), *args, "--seed", str(seed)]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result = json.loads([line for line in text.splitlines() if line.startswith("{")][-1])
    result.update({"side": side, "cell": cell, "algorithm": algorithm, "seed": seed})
    name = f"{side}-{algorithm}-seed{seed}.json" if cell.endswith("-cartpole") else f"{side}-{cell}-seed{seed}.json"
    with open(os.path.join(out, name), "w") as f:
        json.dump(result, f, indent=2)
    return result


def rllib_run(python, cell, side, seed, out, budget_s):
    """RLlib's example for the cell. `side` is `rllib-default` (the example's
    own env runners) or `rllib-RxE` (R env runners x E envs each)."""
    algorithm, _, _, _, _, eval_every, _ = CELLS[cell]
    if cell not in RLLIB_CELLS:
        raise SystemExit(f"{side}: the {cell} cell has no RLlib side (those that do: {sorted(RLLIB_CELLS)})")
    shape = side.removeprefix("rllib-")
    runners, envs = ("-1", "1") if shape == "default" else shape.split("x")
    workload = ["rllib_ppo"] if cell == "ppo-cartpole" else ["rllib_solve", "--algo", algorithm.lower()]
    args = ["--workload", *workload, "--budget-s", str(budget_s), "--eval-every", str(eval_every),
            "--runners", runners, "--envs", envs]
    return harness_run(python, args, side, cell, seed, out)


def summarize(runs, cells, sides):
    rows = []
    for cell in cells:
        for side in sides:
            mine = [r for r in runs if r.get("cell", f"{r['algorithm'].lower()}-cartpole") == cell and r["side"] == side]
            row = {"cell": cell, "algorithm": CELLS[cell][0], "side": side, "seeds": [r["seed"] for r in mine]}
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
    p.add_argument("--budget-s", type=float, default=900.0, help="wall-clock budget of each SB3 run")
    p.add_argument("--cells", default="ppo-cartpole,dqn-cartpole", help=f"comma-separated, of {', '.join(CELLS)}")
    p.add_argument("--sides", default="rlx,sb3", help="comma-separated: rlx, rlx-tuned, sb3, rllib-default, rllib-RxE")
    args = p.parse_args()
    cells = args.cells.split(",")
    sides = args.sides.split(",")
    unknown = [c for c in cells if c not in CELLS]
    if unknown:
        p.error(f"unknown cells {unknown}; known: {list(CELLS)}")
    os.makedirs(args.out, exist_ok=True)
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for cell in cells:
            for side in sides:
                t0 = time.time()
                if side in ("rlx", "rlx-tuned"):
                    r = rlx_run(args.rlx, cell, seed, args.out, tuned=side == "rlx-tuned")
                elif side == "sb3":
                    r = sb3_run(sys.executable, cell, seed, args.out, args.budget_s)
                else:
                    r = rllib_run(sys.executable, cell, side, seed, args.out, args.budget_s)
                runs.append(r)
                print(f"{side} {cell} seed {seed} ({time.time() - t0:.0f} s): {json.dumps(r)}", flush=True)
    from importlib.metadata import version
    summary = {
        "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
        "versions": {k: version(k) for k in ["stable-baselines3", "torch", "gymnasium", "ray"]},
        "runs": runs, "summary": summarize(runs, cells, sides),
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    for row in summary["summary"]:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
