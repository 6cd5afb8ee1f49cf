#!/usr/bin/env python3
"""Medians [ranges] over seeds 1-3 per side of run.sh's runs: env steps in
the 180 s, env steps/s, the mean return of the last 100 training episodes at
the end, and at the first point at or past 100k and 200k env steps."""
import csv
import json
import statistics


def at(curve, steps):
    return next((r for s, r in curve if s >= steps), float("nan"))


def side(name):
    runs = []
    for seed in (1, 2, 3):
        if name == "rlx":
            rows = list(csv.DictReader(open(f"ppo-zoo-rlx-{seed}.csv")))
            curve = [(int(r["timesteps_total"]), float(r["episode_reward_mean"] or "nan")) for r in rows]
            last = rows[-1]
            steps, seconds = int(last["timesteps_total"]), float(last["time_total_s"])
        else:
            w = json.load(open(f"ppo-zoo-sb3-{seed}.json"))["workloads"]["ppo_halfcheetah"]
            curve = [(p["env_steps"], p["episode_reward_mean"]) for p in w["curve"]]
            steps, seconds = w["curve"][-1]["env_steps"], w["curve"][-1]["time_s"]
        runs.append({"steps": steps, "steps_per_s": steps / seconds, "final": curve[-1][1],
                     "at_100k": at(curve, 100_000), "at_200k": at(curve, 200_000)})
    return runs


def fmt(values, digits=0):
    m = statistics.median(values)
    return f"{m:,.{digits}f} [{min(values):,.{digits}f} to {max(values):,.{digits}f}]"


for name in ("rlx", "sb3"):
    runs = side(name)
    print(name, {k: fmt([r[k] for r in runs]) for k in runs[0]})
