#!/usr/bin/env python3
"""Figures of an rlx-chaos output directory that its summary.json (the
chaos runner of 2026-11-25) does not compute:

- the fraction of wall time at the full evaluator count on nodes: each
  iteration a driver trained itself (lines a restored run carried over are
  skipped) counts the driver's time since its previous iteration ended
  (`time_total_s` apart; its step, results and checkpoint) as at full
  count when its `cluster.evaluators_on_nodes` equals
  `cluster.evaluators_target`; the rest of the wall time (iterations below
  the count, start-up, and the time between a driver's kill and its
  restore's first iteration) counts as below;
- the time from a node's return (its restart after SIGKILL, or SIGCONT
  after a stop that lost it) to the driver's `node ADDR admitted again`
  line, for the returns that the drivers' logs cover (the runner keeps
  only the last 2,000 lines of a log over 1 MB);
- node losses and re-admissions in those logs.

Usage: analyse.py OUT_DIR  (prints JSON)
"""
import gzip, json, re, sys
from datetime import datetime
from pathlib import Path
from statistics import median

def lines(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", errors="replace") as f:
        yield from f


def own_iterations(out, summary):
    """(k, row) for each iteration driver k trained itself, in run order
    (a restored run's lines up to its checkpoint were carried over)."""
    restored_at = {r["restored_from"]: r["checkpoint_iteration"] for r in summary["restores"]}
    runs = summary["run_dirs"]
    for k, (run, previous) in enumerate(zip(runs, [None] + runs[:-1])):
        skip_to = restored_at.get(previous, 0) if previous else 0
        for line in lines(next((out / "runs" / run).glob("result.json*"))):
            r = json.loads(line)
            if r["training_iteration"] > skip_to:
                yield k, r


def main():
    out = Path(sys.argv[1])
    summary = json.loads((out / "summary.json").read_text())
    t0 = summary["started_unix_s"]
    full = below = 0.0
    before = {}
    for k, r in own_iterations(out, summary):
        c = r.get("cluster") or {}
        # The driver's time since its previous iteration ended (writing
        # results and checkpoints included); the first: its own step.
        dt = r["time_this_iter_s"] if k not in before else r["time_total_s"] - before[k]
        before[k] = r["time_total_s"]
        if c and c["evaluators_target"] > 0 and c["evaluators_on_nodes"] >= c["evaluators_target"]:
            full += dt
        else:
            below += dt
    wall = summary["wall_time_s"]

    STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z")
    admitted, lost, covered = [], [], []
    for path in sorted(out.glob("driver-*.log*")):
        first = None
        for line in lines(path):
            m = STAMP.match(line)
            if not m:
                continue
            t = datetime.fromisoformat(m.group(1) + "+00:00").timestamp() - t0
            first = t if first is None else first
            last = t
            if a := re.search(r"node (\S+) admitted again", line):
                admitted.append((t, a.group(1)))
            if a := re.search(r"WARN node (\S+) lost: ", line):
                lost.append((t, a.group(1)))
        covered.append((first, last))

    addr_of, faults, returns = {}, {}, []
    for line in (out / "chaos.log").read_text().splitlines():
        m = re.match(r"\[\s*([\d.]+)s\] (.*)", line)
        if not m:
            continue
        t, what = float(m.group(1)), m.group(2)
        if s := re.match(r"started (\S+) on (\S+) \(pid \d+, start #(\d+)\)", what):
            addr_of[s.group(1)] = s.group(2)
            if int(s.group(3)) > 1:
                returns.append((faults.get(s.group(1), t), t, s.group(2)))
        elif s := re.match(r"(SIGKILL|SIGSTOP) (\S+)", what):
            faults[s.group(2)] = t
        elif s := re.match(r"SIGCONT (\S+)", what):
            returns.append((faults.get(s.group(1), t), t, addr_of.get(s.group(1), "?")))

    latencies = []
    for fault_t, t, addr in returns:
        if not any(a <= fault_t and t + 60 <= b for a, b in covered):
            continue
        if not any(fault_t <= lt <= t + 0.5 and who == addr for lt, who in lost):
            continue  # the fault did not lose the node (a short stop)
        after = [a for a, who in admitted if who == addr and a >= t]
        if after:
            latencies.append(round(min(after) - t, 3))

    print(json.dumps({
        "wall_s": wall,
        "trained_s": round(full + below, 1),
        "seconds_at_full_count_on_nodes": round(full, 1),
        "fraction_of_wall_time_at_full_count_on_nodes": round(full / wall, 4),
        "fraction_of_training_time_at_full_count_on_nodes": round(full / (full + below), 4),
        "node_losses_in_logs": len(lost),
        "readmissions_in_logs": len(admitted),
        "readmission_after_return_s": {
            "count": len(latencies),
            "median": median(latencies) if latencies else None,
            "max": max(latencies) if latencies else None,
            "all": latencies,
        },
    }, indent=2))


if __name__ == "__main__":
    main()
