#!/usr/bin/env python3
"""Figures of an rlx-chaos output directory that its summary.json does
not compute (issue 45):

- the fraction of wall time at the full evaluator count on nodes: each
  iteration a driver trained itself (lines a restored run carried over are
  skipped) counts the driver's time since its previous iteration ended
  (`time_total_s` apart; its step, results and checkpoint) as at full
  count when its `cluster.evaluators_on_nodes` equals
  `cluster.evaluators_target`; the rest of the wall time (iterations below
  the count, start-up, and the time between a driver's kill and its
  restore's first iteration) counts as below. An evaluator running in the
  driver by fallback does not count;
- the time from a node's return (its restart after SIGKILL, SIGCONT after
  a stop, or the heal of a partition, when the driver had lost it) to the
  driver admitting it again (`node ADDR admitted again`, or `node NAME
  joined` for the node that joins), matched by the node's IP;
- node losses and re-admissions in the drivers' logs;
- memory (`memory.csv`): each process that lived at least 5 minutes past a
  60 s warm-up, its resident memory after the warm-up and at its last
  sample (a node restarted after SIGKILL is a new process).

Usage: analyse.py OUT_DIR  (prints JSON)

Nodes are told apart by IP, as in runs since 2026-12-01, where each node
has a host of its own. In earlier runs every node was at 127.0.0.1, so
their re-admission times cannot be read this way (and their logs were cut
to the last 2,000 lines when over 1 MB); their other figures can.
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
    IP = r"(\d+\.\d+\.\d+\.\d+):\d+"
    admitted, lost, covered = [], [], []  # (t, ip or name)
    for path in sorted(out.glob("driver-*.log*")):
        first = None
        for line in lines(path):
            m = STAMP.match(line)
            if not m:
                continue
            t = datetime.fromisoformat(m.group(1) + "+00:00").timestamp() - t0
            first = t if first is None else first
            last = t
            if a := re.search(r"node " + IP + r" admitted again", line):
                admitted.append((t, a.group(1)))
            if a := re.search(r"joined from " + IP + r", offering ", line):
                admitted.append((t, a.group(1)))
            if a := re.search(r"WARN node " + IP + r" lost: ", line):
                lost.append((t, a.group(1)))
        if first is not None:
            covered.append((first, last))

    ip_of, faults, returns = {}, {}, []
    for line in (out / "chaos.log").read_text().splitlines():
        m = re.match(r"\[\s*([\d.]+)s\] (.*)", line)
        if not m:
            continue
        t, what = float(m.group(1)), m.group(2)
        if s := re.match(r"started (\S+) on " + IP + r" \(pid \d+, start #(\d+)\)", what):
            ip_of[s.group(1)] = s.group(2)
            if int(s.group(3)) > 1:
                returns.append((faults.get(s.group(1), t), t, s.group(2)))
        elif s := re.match(r"(SIGKILL|SIGSTOP|PARTITION) (chaos-node-\d+)", what):
            faults[s.group(2)] = t
        elif s := re.match(r"(SIGCONT|HEAL) (\S+)$", what):
            returns.append((faults.get(s.group(2), t), t, ip_of.get(s.group(2), "?")))

    latencies = []
    for fault_t, t, ip in returns:
        # The driver that lost the node must still run when it returns (a
        # restored driver admits its nodes as it starts, not again).
        span = next(((a, b) for a, b in covered if a <= fault_t and t <= b), None)
        if span is None:
            continue
        if not any(fault_t <= lt <= t + 0.5 and who == ip for lt, who in lost):
            continue  # the fault did not lose the node (a short stop or cut)
        after = [a for a, who in admitted if who == ip and t <= a <= span[1]]
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
        "seconds_in_which_no_iteration_ended": idle_seconds(out, summary),
        "memory": memory(out),
    }, indent=2))


def driver_starts(out):
    """When each driver started, in seconds from the run's start."""
    return [float(m.group(1)) for m in
            re.finditer(r"\[\s*([\d.]+)s\] driver #\d+ \(pid", (out / "chaos.log").read_text())]


def iterations_in_wall_time(out, summary):
    """(wall second, row) for each iteration a driver trained itself: its
    driver's start plus that driver's own training time so far."""
    starts, first_total = driver_starts(out), {}
    for k, r in own_iterations(out, summary):
        first_total.setdefault(k, r["time_total_s"] - r["time_this_iter_s"])
        yield int(starts[k] + r["time_total_s"] - first_total[k]), r


def idle_seconds(out, summary):
    """Whole seconds of wall time (from the first driver's start to the
    end) in which no iteration the drivers trained themselves ended: the
    stalls a synchronous step has while it waits for a stopped or cut-off
    node, and the gaps around driver restores."""
    ended = {t for t, _ in iterations_in_wall_time(out, summary)}
    span = range(int(driver_starts(out)[0]), int(summary["wall_time_s"]))
    idle = sum(1 for t in span if t not in ended)
    return {"seconds": idle, "of": len(span), "fraction": round(idle / max(1, len(span)), 4)}


def memory(out, warm_up_s=60.0, min_life_s=300.0):
    """Resident memory of each long-lived process, after warm-up and at
    its end, and the largest growth among drivers and among nodes."""
    path = out / "memory.csv"
    if not path.exists():
        return None
    series = {}
    for row in list(lines(path))[1:]:
        t, name, pid, kib = row.strip().split(",")
        series.setdefault((name, pid), []).append((float(t), int(kib)))
    procs = []
    for (name, pid), xs in series.items():
        warm = [x for x in xs if x[0] >= xs[0][0] + warm_up_s]
        if not warm or warm[-1][0] - warm[0][0] < min_life_s:
            continue
        (t0, a), (t1, b) = warm[0], warm[-1]
        procs.append({"process": name, "pid": int(pid), "from_s": t0, "to_s": t1,
                      "rss_mib_after_warm_up": round(a / 1024, 1), "rss_mib_at_end": round(b / 1024, 1),
                      "growth": round(b / a - 1, 4)})
    def worst(kind):
        g = [p["growth"] for p in procs if (p["process"] == "driver") == (kind == "driver")]
        return max(g) if g else None
    return {"processes": procs, "max_growth_driver": worst("driver"), "max_growth_node": worst("node")}


if __name__ == "__main__":
    main()
