"""Drives Gymnasium's CartPole-v1 through rlx's Python client until the
server goes away: `python cartpole_client.py ADDRESS COOKIE_FILE SEED`."""

import sys

import gymnasium as gym

sys.path.insert(0, sys.argv[4] if len(sys.argv) > 4 else ".")
from rlx_client import Dropped, PolicyClient  # noqa: E402


def main():
    address, cookie_file, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = PolicyClient(address, open(cookie_file).read().rstrip("\r\n"))
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    try:
        action = client.start_episode(obs)
        while True:
            obs, reward, terminated, truncated, _ = env.step(action)
            action = client.step(obs, reward, terminated, truncated)
            if action is None:
                obs, _ = env.reset()
                action = client.start_episode(obs)
    except (Dropped, ConnectionError, OSError):
        return 0


if __name__ == "__main__":
    sys.exit(main())
