#!/usr/bin/env python3
"""Medians per configuration and round from run.sh's files: rlx's criterion
throughput (the middle of its [low median high] estimate), RLlib's median
env steps/s and, from part 2, SB3's (the median of its repeats) beside
rlx's rows measured right after each SB3 round."""
import json
import re
import statistics

rows = {}
for r in (1, 2, 3):
    text = open(f"sampling-rlx-{r}.txt").read()
    for name, mid in re.findall(r"^gym_bridge_sampling/(\S+)\n\s+time:.*\n\s+thrpt:\s+\[\S+ \S+ (\S+) Kelem/s", text, re.M):
        rows.setdefault(f"rlx {name}", []).append(float(mid) * 1000)
    for key, w in json.load(open(f"sampling-rllib-breakout-{r}.json"))["workloads"].items():
        rows.setdefault(f"RLlib {w['runners']} runners x {w['envs_per_runner']} envs", []).append(w["steps_per_s"])
for r in (1, 2):
    text = open(f"sampling-rlx-sb3-round-{r}.txt").read()
    for name, mid in re.findall(r"^gym_bridge_sampling/(\S+)\n\s+time:.*\n\s+thrpt:\s+\[\S+ \S+ (\S+) Kelem/s", text, re.M):
        rows.setdefault(f"rlx (part 2) {name}", []).append(float(mid) * 1000)
    for key, rates in json.load(open(f"sampling-sb3-breakout-{r}.json"))["steps_per_s"].items():
        rows.setdefault(f"SB3 {key.split('/')[-1]}", []).append(statistics.median(rates))
for name, values in rows.items():
    print(f"{name}: rounds {', '.join(f'{v:,.0f}' for v in values)}; median {statistics.median(values):,.0f}")
