"""Medians of run.sh's rounds: rlx's criterion rows (the middle throughput
estimate of each round), and the Python side's per-round medians."""
import glob, json, os, re, statistics

here = os.path.dirname(os.path.abspath(__file__))


def middle(line):
    """The middle estimate of a criterion `thrpt: [low mid high]` line."""
    tokens = line.split("[", 1)[1].rstrip("]\n ").split()
    value, unit = float(tokens[2]), tokens[3]
    return value * (1000 if unit.startswith("K") else 1)


rows = {}
for path in sorted(glob.glob(f"{here}/rlx-*.txt")):
    name = None
    for line in open(path):
        if line.startswith("gym_bridge"):
            name = line.split()[0]
        elif "thrpt:" in line and name:
            rows.setdefault("rlx " + name, []).append(middle(line))
            name = None
for kind in ("raw", "sb3"):
    for path in sorted(glob.glob(f"{here}/{kind}-*.json")):
        for name, rates in json.load(open(path))["steps_per_s"].items():
            rows.setdefault(name, []).append(statistics.median(rates))
for name, rounds in rows.items():
    print(f"{name}: rounds {', '.join(f'{r:,.0f}' for r in rounds)}; median {statistics.median(rounds):,.0f}")
