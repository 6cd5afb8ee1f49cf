"""Greedy evaluations against updates for rlx's and d3rlpy's runs of one
results directory of benches/offline/halfcheetah.sh, one panel per
algorithm, as a PNG.

    python benches/offline/curve.py <results dir> <out.png> [ALGO ...]

rlx's updates: BC makes one an iteration (`training_iteration`); IQL and
CQL one a row read once the buffer holds the dataset, counted as the
rows trained on over the batch size (`num_env_steps_trained` /
`train_batch_size`): a resumed run's re-reading of the dataset adds
none. Evaluations before the first update, and repeats of an unchanged
policy (`evaluations.py`: while a resumed run refills its buffer), are
left out. d3rlpy's runs record their updates.
"""
import glob
import json
import sys

from evaluations import new_policy_evaluations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def rlx_runs(out, algorithm):
    for path in sorted(glob.glob(f"{out}/{algorithm}-[0-9]/*/result.json")):
        lines = new_policy_evaluations(json.loads(l) for l in open(path))
        if algorithm == "BC":
            updates = [l["training_iteration"] for l in lines]
        else:
            batch = json.load(open(path.replace("result.json", "params.json")))["config"]["train_batch_size"]
            updates = [l["num_env_steps_trained"] // batch for l in lines]
        yield [(u, l["evaluation"]["episode_reward_mean"]) for u, l in zip(updates, lines) if u > 0]


def d3rlpy_runs(out, algorithm):
    for path in sorted(glob.glob(f"{out}/d3rlpy/d3rlpy-{algorithm}-*.json")):
        yield json.load(open(path))["evaluations"]


def main(out, png, algorithms):
    fig, axes = plt.subplots(1, len(algorithms), figsize=(5 * len(algorithms), 3.8), squeeze=False)
    for ax, algorithm in zip(axes[0], algorithms):
        for library, runs, color in (("rlx", rlx_runs, "C0"), ("d3rlpy", d3rlpy_runs, "C1")):
            for i, evals in enumerate(runs(out, algorithm)):
                ax.plot([u for u, _ in evals], [v for _, v in evals], "o-", color=color, ms=3, lw=1,
                        alpha=0.9, label=f"{library}" if i == 0 else None)
        ax.set_title(f"{algorithm}, greedy return (10 episodes)")
        ax.set_xlabel("updates")
        ax.set_ylabel("return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:] or ["BC", "IQL"])
