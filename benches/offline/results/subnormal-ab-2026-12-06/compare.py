"""Whether two rlx runs' result lines hold the same numbers, times left out.

    python compare.py <run dir A> <run dir B> <name>
"""
import glob
import json
import sys


def numbers(run):
    path = glob.glob(f"{run}/*/result.json")[0]
    out = []
    for line in open(path):
        flat = []

        def walk(d, prefix):
            for k, v in sorted(d.items()):
                if isinstance(v, dict):
                    walk(v, prefix + k + "/")
                elif isinstance(v, (int, float)) and "time" not in k and "per_s" not in k:
                    flat.append((prefix + k, v))

        walk(json.loads(line), "")
        out.append(flat)
    return out


a, b = numbers(sys.argv[1]), numbers(sys.argv[2])
diff = [(i, x, y) for i, (la, lb) in enumerate(zip(a, b)) for x, y in zip(la, lb) if x != y]
count = sum(len(l) for l in a)
verdict = "same" if len(a) == len(b) and not diff else f"DIFFERENT ({len(diff)} values; first: {diff[:3]})"
print(f"{sys.argv[3]}: {len(a)} lines, {count} numbers: {verdict}")
