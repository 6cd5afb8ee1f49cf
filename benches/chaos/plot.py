#!/usr/bin/env python3
"""Env steps per second over the chaos run's wall time, one point per
second (the steps of the iterations that ended in it), with the faults
marked: node kills, node stops, partitions, driver kills. Needs
matplotlib.

Usage: plot.py OUT_DIR PNG
"""
import json, re, sys
from pathlib import Path
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyse import iterations_in_wall_time  # noqa: E402

out, png = Path(sys.argv[1]), sys.argv[2]
summary = json.loads((out / "summary.json").read_text())

per_second = {}
for t, r in iterations_in_wall_time(out, summary):
    per_second[t] = per_second.get(t, 0) + r["timesteps_this_iter"]

fig, ax = plt.subplots(figsize=(11, 4))
# Seconds in which no iteration ended count as 0 steps.
xs = list(range(min(per_second), max(per_second) + 1))
ax.plot(xs, [per_second.get(x, 0) for x in xs], lw=0.6, color="tab:blue", label="env steps per second")
kinds = {"SIGKILL": ("tab:red", "node killed"), "SIGSTOP": ("tab:orange", "node stopped"),
         "PARTITION": ("tab:purple", "node cut off"), "driver": ("black", "driver killed")}
seen = set()
for line in (out / "chaos.log").read_text().splitlines():
    m = re.match(r"\[\s*([\d.]+)s\] SIGKILL driver", line)
    kind = "driver" if m else None
    if not m and (n := re.match(r"\[\s*([\d.]+)s\] (SIGKILL|SIGSTOP|PARTITION) chaos-node", line)):
        m, kind = n, n.group(2)
    if not m:
        continue
    color, label = kinds[kind]
    ax.axvline(float(m.group(1)), color=color, lw=0.5 if kind != "driver" else 1.5, alpha=0.6,
               label=None if kind in seen else label)
    seen.add(kind)
ax.set_xlabel("wall time (s)")
ax.set_ylabel("env steps per second")
algorithm = summary.get("algorithm", "PPO")
ax.set_title(f"rlx-chaos seed {summary['seed']}: {algorithm}, {len(summary['nodes'])} nodes, "
             f"{summary['faults_total']} faults in {summary['wall_time_s']:.0f} s")
ax.legend(loc="lower right", fontsize=8)
fig.tight_layout()
fig.savefig(png, dpi=110)
