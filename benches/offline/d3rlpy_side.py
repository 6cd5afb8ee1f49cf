"""d3rlpy on the same Parquet files as rlx's offline runs: BC, CQL and
IQL, with rlx's settings where both libraries have the key.

Pendulum-v1 (benches/offline/pendulum.sh's data; the defaults): 64x64
networks, greedy evaluations of 20 episodes every 2,000 updates.

    python benches/offline/d3rlpy_side.py <dataset dir> <out dir> [--seeds 1 2 3]

MuJoCo (benches/offline/halfcheetah.sh's data): 256x256 networks, batches
of 256, a fixed number of updates, evaluations every `--every` updates.

    python benches/offline/d3rlpy_side.py <data> <out> --env HalfCheetah-v5 \
        --hidden 256 --updates 100000 --every 10000 --trials 10

Writes <out>/d3rlpy-<ALGO>-<seed>.json: every evaluation and the updates
per second of the run (evaluation excluded), rewritten after each
evaluation (`updates`: how many the run had made). With `--resume` it
also keeps the learner's state as of the last evaluation
(<out>/d3rlpy-<ALGO>-<seed>-at-<updates>.d3, named in the result as
`state`), and a second call goes on from there (`resumed_at` lists where).
Needs d3rlpy, gymnasium with MuJoCo and pyarrow; on 2026-12-07: pip
install d3rlpy==2.8.1 mujoco imageio pyarrow (d3rlpy 2.8.1 pins its own
gymnasium, so `gymnasium[mujoco]==1.4.0` cannot go beside it).
"""
import argparse
import json
import os
import time

import d3rlpy
import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import torch


def load(path):
    """The rlx dataset at `path` (Parquet, one row a step) as an MDPDataset:
    rows sorted by episode and step, each episode ended by its own flags or,
    where a run stopped mid-episode, by a timeout."""
    files = [os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".parquet")]
    table = pq.read_table(files)
    n = table.num_rows

    def column(name):
        col = table.column(name).combine_chunks()
        if hasattr(col, "flatten"):  # a fixed-size list: one row of values per step
            return col.flatten().to_numpy().reshape(n, -1)
        return col.to_numpy().reshape(n, -1)

    eps, t = column("eps_id")[:, 0], column("t")[:, 0]
    order = np.lexsort((t, eps))
    obs = column("obs")[order].astype(np.float32)
    actions = column("actions")[order].astype(np.float32)
    rewards = column("rewards")[order].astype(np.float32)
    terminals = column("terminateds")[order, 0].astype(np.float32)
    timeouts = column("truncateds")[order, 0].astype(np.float32)
    eps = eps[order]
    last = np.r_[eps[1:] != eps[:-1], True]
    timeouts = np.where(last & (terminals == 0), 1.0, timeouts)
    return d3rlpy.dataset.MDPDataset(obs, actions, rewards, terminals, timeouts=timeouts)


def config(name, hidden=64, bc_batch=2000, sac_lr=1e-3):
    """rlx's settings where d3rlpy has the key: ReLU networks of two
    `hidden`-wide layers, SAC's learning rates (`sac_lr`) and CQL's weight 5
    with 10 drawn actions (fixed, no Lagrange), IQL's paper values; BC's
    MARWIL batch (`bc_batch`) at 1e-3. Pendulum's defaults: 64 wide, BC's
    2,000 rows, 1e-3; MuJoCo's: 256 wide, 256 rows, 3e-4."""
    net = d3rlpy.models.encoders.VectorEncoderFactory(hidden_units=[hidden, hidden])
    if name == "BC":
        return d3rlpy.algos.BCConfig(batch_size=bc_batch, learning_rate=1e-3, encoder_factory=net), 100
    if name == "CQL":
        return d3rlpy.algos.CQLConfig(
            batch_size=256,
            actor_learning_rate=sac_lr,
            critic_learning_rate=sac_lr,
            temp_learning_rate=sac_lr,
            alpha_learning_rate=0.0,
            initial_alpha=1.0,
            conservative_weight=5.0,
            n_action_samples=10,
            actor_encoder_factory=net,
            critic_encoder_factory=net,
        ), 9000
    if name == "IQL":
        return d3rlpy.algos.IQLConfig(
            batch_size=256,
            actor_learning_rate=3e-4,
            critic_learning_rate=3e-4,
            expectile=0.7,
            weight_temp=3.0,
            max_weight=100.0,
            actor_encoder_factory=net,
            critic_encoder_factory=net,
            value_encoder_factory=net,
        ), 19000
    raise ValueError(name)


def settings(name, a):
    """The config, the updates of a run and the updates between
    evaluations: Pendulum's where `a.env` is Pendulum, else MuJoCo's (256
    rows, `a.hidden` wide, SAC's rates 3e-4, `a.updates` and `a.every`)."""
    if a.env == "Pendulum-v1":
        cfg, steps = config(name)
        return cfg, steps, 10 if name == "BC" else 2000
    cfg, _ = config(name, hidden=a.hidden, bc_batch=256, sac_lr=3e-4)
    return cfg, a.updates, a.every


def speed(dataset, name, seed, a):
    """Updates per second over the updates rlx's speed runs take (Pendulum:
    100 for BC, 1,000 for CQL and IQL; MuJoCo: `a.updates` at its
    settings), without evaluation, the fit timed."""
    d3rlpy.seed(seed)
    cfg, steps, _ = settings(name, a)
    if a.env == "Pendulum-v1":
        steps = 100 if name == "BC" else 1000
    algo = cfg.create(device="cpu:0")
    start = time.perf_counter()
    algo.fit(dataset, n_steps=steps, n_steps_per_epoch=steps, show_progress=False, save_interval=10**9,
             experiment_name=f"speed-{name}-{seed}", with_timestamp=False)
    print(steps / (time.perf_counter() - start))


def run(dataset, name, seed, out, a):
    """Trains one run with evaluations; the MuJoCo settings where `a.env`
    is not Pendulum's."""
    d3rlpy.seed(seed)
    cfg, steps, every = settings(name, a)
    algo = cfg.create(device="cpu:0")
    env = gym.make(a.env)
    env.reset(seed=seed)
    evaluator = d3rlpy.metrics.EnvironmentEvaluator(env, n_trials=a.trials)
    evals, train_s = [], 0.0
    done, resumed_at = 0, []
    path = os.path.join(out, f"d3rlpy-{name}-{seed}.json")
    saved = {}
    if a.resume and os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
    if saved.get("state") and os.path.exists(os.path.join(out, saved["state"])):
        # The weights and optimizer states as of the last evaluation; the
        # minibatches drawn from here on differ from an unbroken run's.
        algo = d3rlpy.load_learnable(os.path.join(out, saved["state"]), device="cpu:0")
        evals, done = [tuple(e) for e in saved["evaluations"]], saved["updates"]
        train_s = done / saved["updates_per_s"]
        resumed_at = saved.get("resumed_at", []) + [done]
        print(name, seed, "resumed at", done, "updates", flush=True)
    while done < steps:
        n = min(every, steps - done)
        start = time.perf_counter()
        algo.fit(dataset, n_steps=n, n_steps_per_epoch=n, show_progress=False, save_interval=10**9,
                 experiment_name=f"{name}-{seed}", with_timestamp=False)
        train_s += time.perf_counter() - start
        done += n
        evals.append((done, float(evaluator(algo, dataset))))
        print(name, seed, evals[-1], flush=True)
        # Written after every evaluation, so that a run stopped part way
        # keeps its evaluations (`updates` says how far it got).
        result = {"library": "d3rlpy " + d3rlpy.__version__, "env": a.env, "algorithm": name, "seed": seed,
                  "updates": done, "updates_per_s": done / train_s, "evaluations": evals}
        if resumed_at:
            result["resumed_at"] = resumed_at
        if a.resume:
            # Named by its updates, and named in the result only once
            # written whole: the result never points at a later state.
            result["state"] = f"d3rlpy-{name}-{seed}-at-{done}.d3"
            algo.save(os.path.join(out, result["state"]))
        with open(path + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(path + ".tmp", path)
        previous = saved.get("state")
        if previous and previous != result.get("state") and os.path.exists(os.path.join(out, previous)):
            os.remove(os.path.join(out, previous))
        saved = result


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("dataset")
    p.add_argument("out")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--algorithms", nargs="+", default=["BC", "CQL", "IQL"])
    p.add_argument("--speed", action="store_true", help="print updates per second only (benches/offline/speed.sh)")
    p.add_argument("--env", default="Pendulum-v1", help="the Gymnasium env the evaluations run")
    p.add_argument("--hidden", type=int, default=256, help="width of both hidden layers (not Pendulum)")
    p.add_argument("--updates", type=int, default=100000, help="updates per run (not Pendulum)")
    p.add_argument("--every", type=int, default=10000, help="updates between evaluations (not Pendulum)")
    p.add_argument("--trials", type=int, default=20, help="episodes per evaluation")
    p.add_argument("--resume", action="store_true",
                   help="save the learner's state (<out>/d3rlpy-<algo>-<seed>-at-<updates>.d3) after every evaluation and "
                        "go on from it where a stopped run left one: a run longer than a sitting")
    p.add_argument("--threads", type=int, default=0,
                   help="torch's CPU threads (0: torch's default, one a core). With other work on the cores, "
                        "give 1: on 2 shared cores BC ran 3 updates a second with torch's 2 and 92 with 1")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    data = load(a.dataset)
    os.makedirs(a.out, exist_ok=True)
    os.chdir(a.out)  # d3rlpy writes its logs under ./d3rlpy_logs
    for seed in a.seeds:
        for name in a.algorithms:
            if a.speed:
                speed(data, name, seed, a)
            else:
                run(data, name, seed, ".", a)
