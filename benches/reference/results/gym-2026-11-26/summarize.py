#!/usr/bin/env python3
"""Tables of the 2026-11-26 side-by-side runs (run.sh) for the book: per
side, the median and range over seeds 1-3. Run from the repository root:

    python3 benches/reference/results/gym-2026-11-26/summarize.py
"""
import csv
import json
import math
import os
import statistics

DIR = os.path.dirname(os.path.abspath(__file__))


def rlx_curve(name, seed):
    """(time_s, env steps, trained steps, mean return) per iteration."""
    with open(os.path.join(DIR, f"{name}-rlx-{seed}.csv")) as f:
        return [
            (float(r["time_total_s"]), int(r["timesteps_total"]), int(r.get("num_env_steps_trained") or 0),
             float(r["episode_reward_mean"]) if r["episode_reward_mean"] not in ("", "nan") else math.nan)
            for r in csv.DictReader(f)
        ]


def ref_curve(file, steps_key):
    with open(os.path.join(DIR, file)) as f:
        w = next(iter(json.load(f)["workloads"].values()))
    return [(p["time_s"], p[steps_key], p.get("trained_steps", 0), p["episode_reward_mean"]) for p in w["curve"]]


def at_steps(curve, steps):
    """The mean return of the first point at or past `steps` env steps."""
    for t, s, _, r in curve:
        if s >= steps:
            return r
    return math.nan


def med(values):
    values = [v for v in values if v == v]
    if not values:
        return "n/a"
    m = statistics.median(values)
    return f"{m:,.2f} ({min(values):,.2f} to {max(values):,.2f})" if abs(m) < 10 else f"{m:,.0f} ({min(values):,.0f} to {max(values):,.0f})"


def table(title, sides, trained=False, warmup=0):
    print(f"\n{title}")
    for label, curves in sides:
        last = [c[-1] for c in curves]
        line = (f"  {label}: time {med([l[0] for l in last])} s; env steps {med([l[1] for l in last])}; "
                f"env steps/s {med([l[1] / l[0] for l in last])}")
        if trained:
            line += f"; trained steps/s {med([l[2] / l[0] for l in last])}"
        if warmup:
            # After the random warm-up: one update per env step.
            rates = []
            for c in curves:
                t0 = next(t for t, s, _, _ in c if s >= warmup)
                s0 = next(s for t, s, _, _ in c if s >= warmup)
                rates.append((c[-1][1] - s0) / (c[-1][0] - t0))
            line += f"; after the {warmup:,} random steps {med(rates)} env steps (updates)/s"
        line += f"; final mean return {med([l[3] for l in last])}"
        print(line)


def main():
    seeds = [1, 2, 3]
    if os.path.exists(os.path.join(DIR, "impala-breakout-rlx-1.csv")):
        rlx = [rlx_curve("impala-breakout", s) for s in seeds]
        rllib = [ref_curve(f"impala-breakout-rllib-{s}.json", "agent_steps") for s in seeds]
        sides = [("rlx at 29ee13e", rlx), ("RLlib, 1 learner actor", rllib)]
        if os.path.exists(os.path.join(DIR, "impala-breakout-conv-rlx-3.csv")):
            sides.insert(1, ("rlx, CPU convolution", [rlx_curve("impala-breakout-conv", s) for s in seeds]))
        if os.path.exists(os.path.join(DIR, "impala-breakout-rllib-0-learners-3.json")):
            sides.append(("RLlib, learner in the driver",
                          [ref_curve(f"impala-breakout-rllib-0-learners-{s}.json", "agent_steps") for s in seeds]))
        table("IMPALA, ALE/Breakout-v5, 180 s", sides, trained=True)
    for algo, wall in [("sac", 240), ("ppo", 180)]:
        if not os.path.exists(os.path.join(DIR, f"{algo}-halfcheetah-rlx-1.csv")):
            continue
        rlx = [rlx_curve(f"{algo}-halfcheetah", s) for s in seeds]
        sb3 = [ref_curve(f"{algo}-halfcheetah-sb3-{s}.json", "env_steps") for s in seeds]
        table(f"{algo.upper()}, HalfCheetah-v5, {wall} s", [("rlx", rlx), ("SB3", sb3)],
              warmup=10_000 if algo == "sac" else 0)
        common = min(c[-1][1] for c in rlx + sb3)
        print(f"  at {common:,} env steps (the fewest of any run): rlx {med([at_steps(c, common) for c in rlx])}, "
              f"SB3 {med([at_steps(c, common) for c in sb3])}")


if __name__ == "__main__":
    main()
