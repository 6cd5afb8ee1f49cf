"""Greedy evaluations of each run under a results directory of
benches/offline/pendulum.sh or halfcheetah.sh: every evaluation, the mean
of the last three, and per algorithm the mean over seeds of that. d3rlpy's
runs (`<out>/d3rlpy/d3rlpy-<ALGO>-<seed>.json`) are listed as
`d3rlpy-<ALGO>`, with their updates per second."""
import glob
import json
import statistics
import sys

from evaluations import new_policy_evaluations

out = sys.argv[1]
per_algorithm = {}
# A run's result.json under <algorithm>-<seed>/<run dir>/ as pendulum.sh
# leaves it, or right under <algorithm>-<seed>/ as the kept raw files.
paths = glob.glob(f"{out}/*-[0-9]/*/result.json") + glob.glob(f"{out}/*-[0-9]/result.json")
for path in sorted(paths):
    run = next(part for part in path.split("/") if part[-2:-1] == "-" and part[-1].isdigit())
    algorithm = run.rsplit("-", 1)[0]
    rows = [r for r in map(json.loads, open(path)) if "evaluation" in r]
    evals = [(r["timesteps_total"], r["evaluation"]["episode_reward_mean"]) for r in new_policy_evaluations(rows)]
    repeats = len(rows) - len(evals)
    last3 = statistics.mean(v for _, v in evals[-3:])
    per_algorithm.setdefault(algorithm, []).append(last3)
    left_out = f" ({repeats} repeats of an unchanged policy left out)" if repeats else ""
    print(f"{run:8} last three {last3:8.1f}  every evaluation{left_out}: " + ", ".join(f"{v:.0f}" for _, v in evals))
for path in sorted(glob.glob(f"{out}/d3rlpy/d3rlpy-*.json")):
    run = json.load(open(path))
    algorithm = f"d3rlpy-{run['algorithm']}"
    values = [v for _, v in run["evaluations"]]
    last3 = statistics.mean(values[-3:])
    per_algorithm.setdefault(algorithm, []).append(last3)
    print(
        f"{algorithm}-{run['seed']} last three {last3:8.1f}  {run['updates']} updates at {run['updates_per_s']:.1f}/s  every evaluation: "
        + ", ".join(f"{v:.0f}" for v in values)
    )
for algorithm, values in per_algorithm.items():
    print(f"{algorithm:8} mean over seeds of the last three: {statistics.mean(values):8.1f} ({len(values)} seeds)")
