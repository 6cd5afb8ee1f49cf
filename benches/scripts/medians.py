#!/usr/bin/env python3
"""Print the median of every criterion benchmark under target/criterion.

Criterion's console line shows a confidence interval of the mean; the book
reports medians, which this reads from each benchmark's estimates.json.
Throughput (elements per second) is elements per iteration / median time.

    python3 benches/scripts/medians.py [filter]
"""
import glob
import json
import os
import sys

pattern = sys.argv[1] if len(sys.argv) > 1 else ""
for path in sorted(glob.glob("target/criterion/**/new/estimates.json", recursive=True)):
    bench = os.path.dirname(os.path.dirname(path)).removeprefix("target/criterion/")
    if pattern not in bench:
        continue
    median_ns = json.load(open(path))["median"]["point_estimate"]
    line = f"{bench:64s} median {median_ns / 1e6:12.3f} ms"
    meta = os.path.join(os.path.dirname(path), "benchmark.json")
    throughput = json.load(open(meta)).get("throughput") if os.path.exists(meta) else None
    if throughput and "Elements" in throughput:
        line += f"  {throughput['Elements'] / (median_ns * 1e-9):14,.0f} elements/s"
    print(line)
