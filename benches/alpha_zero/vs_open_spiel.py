"""rlx's AlphaZero checkpoints against OpenSpiel's MCTSBot on Connect Four.

Each game runs `rlx play <checkpoint> --seat S --simulations N` as a
subprocess and stands in for the person: it types MCTSBot's moves and reads
rlx's ("AlphaZero plays C"). Every move of both sides is also played on
OpenSpiel's `connect_four`, so the game's end and winner are checked
against OpenSpiel's rules as the games go. MCTSBot uses OpenSpiel's
defaults (UCT c = 2, solving) with random rollouts.

    python benches/alpha_zero/vs_open_spiel.py <checkpoint or run dir> \
        [--rlx target/release/rlx] [--games-per-seat 50] \
        [--rlx-simulations 200] [--mcts-simulations 1000] [--seat 0|1] \
        [--out results.json]

`--seat` plays only the games with rlx in that seat (seeds as in a run of
both), so that the two seats run side by side on two cores;
`--merge a.json b.json --out all.json` joins such halves.

Prints one line per game and the win, draw and loss shares for rlx; with
--out, writes them and every game's moves as JSON.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pyspiel
from open_spiel.python.algorithms import mcts

PLAYS = re.compile(rb"AlphaZero plays (\d+)")


class RlxPlayer:
    """`rlx play` in a subprocess, read event by event."""

    def __init__(self, rlx, checkpoint, seat, simulations, seed):
        args = [rlx, "play", checkpoint, "--seat", str(seat), "--simulations", str(simulations), "--seed", str(seed)]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.buf = b""

    def next_event(self):
        """("move", c), ("prompt", None) or ("end", text), in the order rlx printed them."""
        while True:
            found = []
            m = PLAYS.search(self.buf)
            if m:
                found.append((m.start(), "move", m))
            prompt = self.buf.find(b"your move (")
            if prompt >= 0 and b"): " in self.buf[prompt:]:
                found.append((prompt, "prompt", None))
            for end in (b"You win.", b"You lose.", b"A draw."):
                at = self.buf.find(end)
                if at >= 0:
                    found.append((at, "end", end))
            if found:
                at, kind, what = min(found, key=lambda f: f[0])
                if kind == "move":
                    self.buf = self.buf[what.end():]
                    return ("move", int(what.group(1)))
                if kind == "prompt":
                    self.buf = self.buf[self.buf.index(b"): ", at) + 3:]
                    return ("prompt", None)
                return ("end", what.decode())
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                sys.exit(f"rlx play ended unexpectedly:\n{self.buf.decode(errors='replace')}")
            self.buf += chunk

    def send(self, move):
        self.proc.stdin.write(f"{move}\n".encode())
        self.proc.stdin.flush()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def opponent(game, simulations, seed):
    """The opponent: MCTSBot with OpenSpiel's defaults (UCT c = 2, solving)
    and one random rollout per leaf, seeded by the game's seed."""
    return mcts.MCTSBot(
        game,
        uct_c=2,
        max_simulations=simulations,
        evaluator=mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=np.random.RandomState(seed)),
        random_state=np.random.RandomState(seed + 1),
        solve=True,
    )


def game_seed(seat, g):
    """The seed of game `g` with the player under test in `seat`."""
    return 1000 * seat + g


def play_game(args, game, seat, seed):
    """One game, rlx in `seat`; returns rlx's score and the moves."""
    bot = opponent(game, args.mcts_simulations, seed)
    state = game.new_initial_state()
    # rlx play's person is MCTSBot: its seat is the other one.
    rlx = RlxPlayer(args.rlx, args.checkpoint, 1 - seat, args.rlx_simulations, seed)
    moves = []
    while True:
        kind, value = rlx.next_event()
        if kind == "move":
            state.apply_action(value)
            moves.append(value)
        elif kind == "prompt":
            action = bot.step(state)
            state.apply_action(action)
            moves.append(action)
            rlx.send(action)
        else:
            rlx.close()
            score = state.returns()[seat]
            expected = {"You win.": -1.0, "You lose.": 1.0, "A draw.": 0.0}[value]
            if not state.is_terminal() or score != expected:
                sys.exit(f"rlx says `{value}` but OpenSpiel's state is\n{state}\nreturns {state.returns()}")
            return score, moves


def main():
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint")
    p.add_argument("--rlx", default="target/release/rlx")
    p.add_argument("--games-per-seat", type=int, default=50)
    p.add_argument("--rlx-simulations", type=int, default=200)
    p.add_argument("--mcts-simulations", type=int, default=1000)
    p.add_argument("--seat", type=int, choices=(0, 1))
    p.add_argument("--merge", nargs="+", help="result files of single seats to join (no games played)")
    p.add_argument("--out")
    args = p.parse_args()
    if args.merge:
        halves = [json.load(open(f)) for f in args.merge]
        report(args, [g for h in halves for g in h["games"]], {"merged": args.merge, **halves[0]["args"]})
        return
    game = pyspiel.load_game("connect_four")
    games = []
    t0 = time.time()
    for seat in (0, 1) if args.seat is None else (args.seat,):
        for g in range(args.games_per_seat):
            score, moves = play_game(args, game, seat, seed=game_seed(seat, g))
            games.append({"rlx_seat": seat, "score": score, "moves": moves})
            print(f"seat {seat} game {g}: rlx {score:+.0f} in {len(moves)} moves ({time.time() - t0:.0f} s)", flush=True)
    report(args, games, vars(args))


def report(args, games, settings, who="rlx"):
    """Prints the shares of `games` for the player under test and writes
    them with the games to --out."""
    scores = [g["score"] for g in games]
    shares = {k: sum(f(s) for s in scores) / len(scores) for k, f in
              (("win", lambda s: s > 0), ("draw", lambda s: s == 0), ("loss", lambda s: s < 0))}
    ours, bot = settings[f"{who}_simulations"], settings["mcts_simulations"]
    print(f"{who} ({ours} simulations) vs MCTSBot ({bot}): {shares} over {len(scores)} games")
    if args.out:
        json.dump({"args": settings, "shares": shares, "games": games}, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
