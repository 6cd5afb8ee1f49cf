"""Medians of raw.txt's rates per workload and side, and new/old."""
import collections, statistics, sys
rates = collections.defaultdict(list)
for line in open(sys.argv[1] if len(sys.argv) > 1 else "raw.txt"):
    w, side, _, rate, _ = line.split()
    rates[w, side].append(float(rate))
for w in dict.fromkeys(k[0] for k in rates):
    old, new = statistics.median(rates[w, "old"]), statistics.median(rates[w, "new"])
    print(f"| {w} | {old:.0f} {[round(x) for x in rates[w, 'old']]} | {new:.0f} {[round(x) for x in rates[w, 'new']]} | {new / old:.2f}× |")
