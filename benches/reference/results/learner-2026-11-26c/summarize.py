#!/usr/bin/env python3
"""Criterion's middle estimates from ab.sh's files, per benchmark, build
and round: time per update (models) and env steps/s (sampling)."""
import re

for kind, line in (("models", "time"), ("sampling", "thrpt")):
    rows = {}
    for build in ("noavx", "avx"):
        for r in (1, 2):
            text = open(f"{kind}-{build}-{r}.txt").read()
            pattern = rf"^({kind}/\S+)\n(?:.*\n)*?\s+{line}:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]"
            for name, mid, unit in re.findall(pattern, text, re.M):
                rows.setdefault(name, {}).setdefault(build, []).append(f"{mid} {unit}")
    for name, builds in rows.items():
        print(name, " | ".join(f"{b}: {', '.join(v)}" for b, v in builds.items()))
