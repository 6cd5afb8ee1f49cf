"""The win rate of an AlphaZero run against time, as a PNG.

    python benches/alpha_zero/curve.py <run dir> <out.png> [vs_open_spiel JSON ...]

Reads `<run dir>/result.json` (or `result.json.gz`). Draws the arena's win share against each `mcts_<n>` opponent from the
run's result.json (with search, and the network alone), and, for each
JSON file written by vs_open_spiel.py --out (its checkpoint's iteration
read from the path), the win share against OpenSpiel's MCTSBot, all
against the run's wall time.
"""
import gzip
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(run, out, spiel_files):
    path = f"{run}/result.json"
    text = gzip.open(path + ".gz", "rt").read() if os.path.exists(path + ".gz") else open(path).read()
    lines = [json.loads(l) for l in text.splitlines()]
    minutes = {l["training_iteration"]: l["time_total_s"] / 60 for l in lines}
    fig, ax = plt.subplots(figsize=(7, 4))
    arena = [l for l in lines if l.get("evaluation", {}).get("arena")]
    for opponent in sorted({k for l in arena for k in l["evaluation"]["arena"] if k.startswith("mcts_")}):
        xs = [minutes[l["training_iteration"]] for l in arena]
        ys = [l["evaluation"]["arena"][opponent]["win"] for l in arena]
        raw = [l["evaluation"]["arena"][opponent]["without_search"]["win"] for l in arena]
        games = arena[-1]["evaluation"]["arena"][opponent]["games"]
        ax.plot(xs, ys, alpha=0.6, label=f"vs rlx pure {opponent} ({games} games), with search")
        ax.plot(xs, raw, alpha=0.4, linestyle=":", label=f"vs rlx pure {opponent}, network alone")
    points = []
    for f in spiel_files:
        result = json.load(open(f))
        iteration = int(re.search(r"checkpoint_(\d+)", result["args"]["checkpoint"]).group(1))
        points.append((minutes[iteration], result["shares"]["win"], len(result["games"]), result["args"]))
    if points:
        points.sort()
        args = points[0][3]
        label = f"vs OpenSpiel MCTSBot ({args['mcts_simulations']} simulations), rlx {args['rlx_simulations']}"
        ax.plot([p[0] for p in points], [p[1] for p in points], "o-", color="black", label=label)
        for x, y, n, _ in points:
            ax.annotate(f"{n}", (x, y), textcoords="offset points", xytext=(0, -12), fontsize=7, ha="center")
    ax.axhline(0.9, color="grey", linewidth=0.5, linestyle="--")
    ax.set_xlabel("wall time, minutes (2 cores)")
    ax.set_ylabel("share of games won")
    ax.set_ylim(0, 1.02)
    ax.set_title("AlphaZero on ConnectFour")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
