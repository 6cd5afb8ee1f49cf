"""Summarizes benches/scripts/seed_table.sh's runs beside the seed paper's
IMPALA table (RLlib, 32 workers, one hour per game).

    python seed_table.py OUT SECONDS_PER_GAME WORKERS ENVS DEVICE

Prints one line per game and writes OUT/summary.json. The rlx returns are
per life and of clipped rewards (DeepMind's preprocessing, rlx's default
for ALE/ ids), so they are not game scores: the first mean (the first
iteration with a finished episode, from a barely trained policy) is
printed beside the last as the baseline.
"""
import glob
import json
import os
import sys

# The seed paper's table: IMPALA on RLlib after one hour with 32 workers.
SEED_HOUR = {"BeamRider": 3181, "Breakout": 538, "Qbert": 10850, "SpaceInvaders": 843}


def lines(path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    return  # a torn last line of a killed run


def main():
    out, seconds, workers, envs, device = sys.argv[1:6]
    rows = []
    for game, seed_score in SEED_HOUR.items():
        found = sorted(glob.glob(os.path.join(out, f"IMPALA_gym-ALE-{game}-v5*", "result.json")))
        results = list(lines(found[-1])) if found else []
        if not results:
            rows.append({"game": game, "seed_hour": seed_score, "error": "no result.json"})
            continue
        # Early iterations of long games may have no finished episode yet.
        returns = [r["episode_reward_mean"] for r in results if r.get("episode_reward_mean") is not None]
        last = results[-1]
        if not returns:
            rows.append({"game": game, "seed_hour": seed_score, "error": "no episode finished"})
            continue
        rows.append({
            "game": game,
            "seed_hour": seed_score,
            "time_total_s": round(last["time_total_s"], 1),
            "env_steps": last["timesteps_total"],
            "env_steps_trained": last.get("num_env_steps_trained"),
            "frames": 4 * last["timesteps_total"],
            "env_steps_per_s": round(last["timesteps_total"] / last["time_total_s"], 1),
            "trained_per_s": round((last.get("num_env_steps_trained") or 0) / last["time_total_s"], 1),
            "episodes_lives": last["episodes_total"],
            "first_return_per_life": round(returns[0], 3),
            "last_return_per_life": round(returns[-1], 3),
            "best_return_per_life": round(max(returns), 3),
        })
    summary = {"seconds_per_game": float(seconds), "workers": int(workers), "envs_per_worker": int(envs),
               "device": device, "games": rows}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"{seconds} s per game, {workers} workers x {envs} copies, learner on {device}")
    for r in rows:
        if "error" in r:
            print(f"{r['game']:>14}: {r['error']}")
            continue
        print(f"{r['game']:>14}: {r['env_steps']:>9,} env steps ({r['env_steps_per_s']:,.0f}/s, "
              f"trained {r['trained_per_s']:,.0f}/s), {r['episodes_lives']:,} lives, return per life "
              f"{r['first_return_per_life']} -> {r['last_return_per_life']} (best {r['best_return_per_life']}); "
              f"seed's hour: {r['seed_hour']:,} (game score)")


if __name__ == "__main__":
    main()
