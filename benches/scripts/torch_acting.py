#!/usr/bin/env python3
"""Acting with the Nature CNN on PyTorch, per frame, to set beside the
`models/acting` criterion group (benches/benches/models.rs): Stable-
Baselines3's `ActorCriticCnnPolicy` (the Nature CNN, `features_dim` 256
shared by the policy and value heads, as rlx's `{"fcnet_hiddens": [256],
"vf_share_layers": true}`) computing sampled actions, values and log-
probabilities for 8 frames of 4 x 84 x 84 bytes, what SB3's PPO does each
step of 8 envs (`policy.forward` under `torch.no_grad`, from the uint8
observations, its /255 included), on 1 and 2 torch threads.

Usage (an interpreter with torch and stable-baselines3):

    python benches/scripts/torch_acting.py --out torch.json [--seconds 5] [--repeats 5]

Prints and writes the median time per frame of `--repeats` timings.
"""
import argparse
import json
import statistics
import time

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticCnnPolicy

FRAMES = 8


def per_frame(threads, seconds):
    torch.set_num_threads(threads)
    policy = ActorCriticCnnPolicy(
        spaces.Box(0, 255, (4, 84, 84), np.uint8), spaces.Discrete(4), lambda _: 2.5e-4,
        features_extractor_kwargs={"features_dim": 256},
    )
    policy.set_training_mode(False)
    obs = np.random.default_rng(0).integers(0, 256, size=(FRAMES, 4, 84, 84), dtype=np.uint8)
    calls = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        with torch.no_grad():
            tensor, _ = policy.obs_to_tensor(obs)
            actions, values, log_probs = policy(tensor)
        actions.cpu().numpy()
        calls += 1
    return (time.perf_counter() - t0) / (calls * FRAMES)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    runs = {}
    for threads in (1, 2):
        times = [per_frame(threads, args.seconds) for _ in range(args.repeats)]
        runs[f"sb3_cnn_acting/{threads}_threads"] = times
        print(f"torch {threads} thread(s): median {statistics.median(times) * 1e6:7.1f} us per frame  "
              f"{[round(t * 1e6, 1) for t in times]}", flush=True)
    import stable_baselines3

    meta = {"torch": torch.__version__, "stable_baselines3": stable_baselines3.__version__, "frames": FRAMES,
            "seconds": args.seconds}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "seconds_per_frame": runs}, f, indent=1)


if __name__ == "__main__":
    main()
