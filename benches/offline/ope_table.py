"""Prints the off-policy estimates of a run beside its evaluations, as a
Markdown table: `python3 ope_table.py <results dir> <truth>`.

`<truth>` says what an evaluation's own return means. `cartpole`: each
step pays 1, so an episode of L steps is worth (1 - 0.99^L) / 0.01, shown
for the mean length (and the shortest episode's length). `return`: the
evaluation's plain mean return (and its min and max), for gamma 1."""
import glob
import json
import sys

run, truth = sys.argv[1], sys.argv[2]
lines = [json.loads(l) for l in open(glob.glob(run + "/*/result.json")[0])]
print("| iteration | v_behavior | is | wis | dm | dr | on-policy |")
for r in lines:
    if "evaluation" not in r:
        continue
    o, e = r["off_policy_estimation"], r["evaluation"]
    first = next(iter(o.values()))
    row = [r["training_iteration"], first["v_behavior"]]
    row += [o[m]["v_target"] if m in o else "" for m in ("is", "wis", "dm", "dr")]
    if truth == "cartpole":
        worth = lambda n: (1 - 0.99 ** n) / 0.01
        own = f"{worth(e['episode_len_mean']):.1f} ({e['episode_len_mean']:.0f}, min {e['episode_reward_min']:.0f})"
    else:
        own = f"{e['episode_reward_mean']:.1f} ({e['episode_reward_min']:.0f}, {e['episode_reward_max']:.0f})"
    print("| " + " | ".join(f"{x:.1f}" if isinstance(x, float) else str(x) for x in row) + f" | {own} |")
