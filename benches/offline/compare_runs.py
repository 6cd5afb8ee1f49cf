"""Whether two rlx runs' result lines hold the same numbers, times left out
(keys with `time` or `per_s` in them, or ending in `_s`: seconds).

    python compare_runs.py <run dir A> <run dir B> <name>

Compares line by line, key by key; keys that only one side reports are
named, not counted as different.
"""
import glob
import json
import sys


def is_time(key):
    return "time" in key or "per_s" in key or key.endswith("_s")


def numbers(run):
    path = glob.glob(f"{run}/*/result.json")[0]
    out = []
    for line in open(path):
        flat = {}

        def walk(d, prefix):
            for k, v in d.items():
                if isinstance(v, dict):
                    walk(v, prefix + k + "/")
                elif isinstance(v, (int, float)) and not is_time(k):
                    flat[prefix + k] = v

        walk(json.loads(line), "")
        out.append(flat)
    return out


a, b = numbers(sys.argv[1]), numbers(sys.argv[2])
diff = [(i, k, la[k], lb[k]) for i, (la, lb) in enumerate(zip(a, b)) for k in la.keys() & lb.keys() if la[k] != lb[k]]
only_a = sorted({k for la, lb in zip(a, b) for k in la.keys() - lb.keys()})
only_b = sorted({k for la, lb in zip(a, b) for k in lb.keys() - la.keys()})
count = sum(len(la.keys() & lb.keys()) for la, lb in zip(a, b))
verdict = "same" if len(a) == len(b) and not diff else f"DIFFERENT ({len(diff)} values; first: {diff[:3]})"
extra = "".join(f"; only in {side}: {keys}" for side, keys in (("A", only_a), ("B", only_b)) if keys)
print(f"{sys.argv[3]}: {len(a)} lines, {count} numbers compared: {verdict}{extra}")
