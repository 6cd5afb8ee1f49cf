"""Updates per second of Stable-Baselines3's SAC on Pendulum-v1 with the
zoo's settings (SB3's defaults: 256x256 ReLU networks, batch 256, one
update per env step after 100 steps; lr 1e-3), for a fixed number of env
steps. Prints seed, env steps, seconds, updates, updates per second."""
import sys, time
import torch
from stable_baselines3 import SAC

seed, steps = int(sys.argv[1]), int(sys.argv[2])
model = SAC("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, seed=seed, device="cpu", verbose=0)
start = time.perf_counter()
model.learn(total_timesteps=steps)
seconds = time.perf_counter() - start
updates = model._n_updates
print("sb3", seed, steps, round(seconds, 2), updates, round(updates / seconds, 1), "torch threads", torch.get_num_threads())
