"""Replays games of rlx's ConnectFour in OpenSpiel's `connect_four`.

Reads a JSON list of games, each a list of positions: the moves that led
to it, its legal moves, whether it is over, the returns if so, and its
board as rlx renders it. Prints the first disagreement and exits 1, or
prints how many positions agreed.
"""
import json
import sys

import pyspiel


def main(path):
    games = json.load(open(path))
    game = pyspiel.load_game("connect_four")
    positions = 0
    for g, record in enumerate(games):
        state = game.new_initial_state()
        for p, pos in enumerate(record):
            moves = pos["moves"]
            if moves:
                state.apply_action(moves[-1])
            where = f"game {g}, position {p} (moves {moves})"
            if state.is_terminal() != pos["terminal"]:
                sys.exit(f"{where}: OpenSpiel terminal {state.is_terminal()}, rlx {pos['terminal']}")
            if state.is_terminal():
                if [float(r) for r in state.returns()] != pos["returns"]:
                    sys.exit(f"{where}: OpenSpiel returns {state.returns()}, rlx {pos['returns']}")
            else:
                if state.legal_actions() != pos["legal"]:
                    sys.exit(f"{where}: OpenSpiel legal {state.legal_actions()}, rlx {pos['legal']}")
                if state.current_player() != pos["to_move"]:
                    sys.exit(f"{where}: OpenSpiel to move {state.current_player()}, rlx {pos['to_move']}")
            board = str(state).strip().split("\n")
            if board != pos["board"].split("\n")[:6]:
                sys.exit(f"{where}: OpenSpiel board\n{str(state)}\nrlx board\n{pos['board']}")
            positions += 1
    print(f"{positions} positions agree")


if __name__ == "__main__":
    main(sys.argv[1])
