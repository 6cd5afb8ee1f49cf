"""OpenSpiel's own AlphaZero on Connect Four, measured as rlx's is.

Training is OpenSpiel's example, unchanged (`python -m
open_spiel.python.examples.alpha_zero`, see `open_spiel_reference.sh` for
the flags). This script plays its checkpoints against the same opponent
and on the same seeds as `vs_open_spiel.py` plays rlx's: OpenSpiel's
MCTSBot with 1,000 simulations, UCT c = 2, one random rollout per leaf and
solving. OpenSpiel's AlphaZero searches `--simulations` (200, as rlx) with
its own evaluation bot (PUCT, its network as prior and value, no root
noise) and plays the most visited move.

    python benches/alpha_zero/open_spiel_reference.py <run dir> --step N \\
        [--games-per-seat 50] [--simulations 200] [--mcts-simulations 1000] \\
        [--seat 0|1] [--out result.json]
    python benches/alpha_zero/open_spiel_reference.py x --merge a.json b.json --out all.json
    python benches/alpha_zero/open_spiel_reference.py <run dir> --timeline

`--timeline` prints each saved checkpoint's step with the minutes since the
run started, from the learner's log.

Needs open_spiel 2.0.2 with its JAX extras (jax, flax, optax, chex).
"""
import argparse
import json
import os
import re
import sys
import time
from datetime import datetime

import pyspiel
from open_spiel.python.algorithms import mcts
from open_spiel.python.algorithms.alpha_zero import evaluator as evaluator_lib
from open_spiel.python.algorithms.alpha_zero import utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_open_spiel import game_seed, opponent, report  # noqa: E402


def load_model(run, step):
    """The network of checkpoint `step` of the run in `run`, built from the
    run's own config.json."""
    config = json.load(open(os.path.join(run, "config.json")))
    model = utils.api_selector(config["nn_api_version"]).Model.build_model(
        config["nn_model"],
        config["observation_shape"],
        config["output_size"],
        config["nn_width"],
        config["nn_depth"],
        config["weight_decay"],
        config["learning_rate"],
        run,
    )
    model.load_checkpoint(step)
    return config, model


def az_bot(game, config, model, simulations):
    """OpenSpiel's AlphaZero player as its own evaluator process builds it
    (`alpha_zero._init_bot` with `evaluation=True`)."""
    return mcts.MCTSBot(
        game,
        config["uct_c"],
        simulations,
        evaluator_lib.AlphaZeroEvaluator(game, model),
        solve=False,
        dirichlet_noise=None,
        child_selection_fn=mcts.SearchNode.puct_value,
        dont_return_chance_node=True,
    )


def play_game(game, az, seat, args, seed):
    """One game, OpenSpiel's AlphaZero in `seat`; its score and the moves."""
    bots = {seat: az, 1 - seat: opponent(game, args.mcts_simulations, seed)}
    state = game.new_initial_state()
    moves = []
    while not state.is_terminal():
        action = bots[state.current_player()].step(state)
        state.apply_action(action)
        moves.append(action)
    return state.returns()[seat], moves


def timeline(run):
    """(step, minutes since the learner started) of every checkpoint saved."""
    start, out = None, []
    stamp = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] (.*)$")
    for line in open(os.path.join(run, "log-learner.txt")):
        m = stamp.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f")
        start = start or t
        saved = re.match(r"Checkpoint saved: (\d+)", m.group(2))
        if saved:
            out.append((int(saved.group(1)), (t - start).total_seconds() / 60))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--step", type=int)
    p.add_argument("--games-per-seat", type=int, default=50)
    p.add_argument("--simulations", type=int, default=200)
    p.add_argument("--mcts-simulations", type=int, default=1000)
    p.add_argument("--seat", type=int, choices=(0, 1))
    p.add_argument("--merge", nargs="+")
    p.add_argument("--timeline", action="store_true")
    p.add_argument("--out")
    args = p.parse_args()
    if args.timeline:
        for step, minutes in timeline(args.run):
            print(f"{step}\t{minutes:.1f}")
        return
    if args.merge:
        halves = [json.load(open(f)) for f in args.merge]
        games = [g for h in halves for g in h["games"]]
        report(args, games, {"merged": args.merge, **halves[0]["args"]}, who="open_spiel")
        return
    if args.step is None:
        sys.exit("--step N: which checkpoint of the run to play")
    game = pyspiel.load_game("connect_four")
    config, model = load_model(args.run, args.step)
    az = az_bot(game, config, model, args.simulations)
    games, t0 = [], time.time()
    for seat in (0, 1) if args.seat is None else (args.seat,):
        for g in range(args.games_per_seat):
            score, moves = play_game(game, az, seat, args, game_seed(seat, g))
            games.append({"seat": seat, "score": score, "moves": moves})
            print(f"seat {seat} game {g}: open_spiel {score:+.0f} in {len(moves)} moves ({time.time() - t0:.0f} s)",
                  flush=True)
    settings = {**vars(args), "open_spiel_simulations": args.simulations}
    report(args, games, settings, who="open_spiel")


if __name__ == "__main__":
    main()
