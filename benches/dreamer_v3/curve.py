"""Training and greedy-evaluation returns of rlx runs against env steps, as a PNG.

    python benches/dreamer_v3/curve.py <out.png> <title> <label>=<run dir> [<label>=<run dir> ...]

Reads each `<run dir>/result.json`: the training episodes' mean return
(thin line) and, where the run evaluated, the greedy evaluation's mean
(markers), against `timesteps_total`. A `<label>=<file>.jsonl` is a run
of rllib_side.py: its greedy evaluations only.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(out, title, runs):
    fig, ax = plt.subplots(figsize=(9, 4))
    for i, (label, run) in enumerate(runs):
        color = f"C{i}"
        if run.endswith(".jsonl"):
            rows = [json.loads(l) for l in open(run)]
            ax.plot([r["env_steps"] for r in rows], [r["greedy"] for r in rows], "s:", color=color, ms=4,
                    label=f"{label}, greedy evaluation")
            continue
        lines = [json.loads(l) for l in open(f"{run}/result.json")]
        ax.plot([l["timesteps_total"] for l in lines], [l["episode_reward_mean"] for l in lines], color=color, lw=1,
                label=f"{label}, training")
        evals = [l for l in lines if "evaluation" in l]
        ax.plot([l["timesteps_total"] for l in evals], [l["evaluation"]["episode_reward_mean"] for l in evals], "o--",
                color=color, ms=4, label=f"{label}, greedy evaluation")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], [tuple(a.split("=", 1)) for a in sys.argv[3:]])
