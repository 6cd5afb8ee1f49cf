"""Streams a Minari dataset as rlx experience, for `input`.

rlx runs this as `python -c <this file> <data path> [describe]`, where the
data path is the directory holding Minari's `metadata.json` (a dataset's
`data/`). Minari reads its own storage (HDF5's `main_data.hdf5` or Arrow,
as the metadata declares); this prints what rlx's reader takes:

- first, one line: the dataset's `_dataset.json` (spaces and columns);
- then, unless `describe` is given, one line per episode in rlx's JSON-lines
  shape (`{"type": "SampleBatch", "eps_id": [...], "t": [...], "obs": ...}`).

Floats are written as Python floats (the exact double of each value), so
rlx reads back the same `f32` values Minari holds. Errors go to stderr and
end the process with status 2.
"""

import json
import math
import sys


def fail(message):
    print(f"rlx_minari: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def bound(x):
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def space_json(space, np):
    """The space in rlx's `_dataset.json` shape, and its column type and width."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) != 0:
            fail(f"a Discrete space starting at {space.start}: rlx's start at 0")
        return {"Discrete": {"n": int(space.n)}}, "i64", 1
    if isinstance(space, gym.spaces.Box):
        if space.dtype == np.uint8:
            fail("a uint8 Box (images): rlx reads Minari datasets of float Boxes, Discrete and MultiDiscrete spaces")
        shape = [int(d) for d in space.shape]
        width = int(np.prod(shape)) if shape else 1
        low = [bound(x) for x in np.asarray(space.low, dtype=np.float64).reshape(-1)]
        high = [bound(x) for x in np.asarray(space.high, dtype=np.float64).reshape(-1)]
        box = {"low": low, "high": high, "shape": shape, "dtype": "F32"}
        return {"Box": box}, "f32", width
    if isinstance(space, gym.spaces.MultiDiscrete):
        if np.any(np.asarray(getattr(space, "start", 0)) != 0):
            fail(f"a MultiDiscrete space starting at {space.start}: rlx's start at 0")
        return {"MultiDiscrete": {"nvec": [int(n) for n in space.nvec.reshape(-1)]}}, "i64", len(space.nvec.reshape(-1))
    fail(f"a {type(space).__name__} space: rlx reads Minari datasets of Box, Discrete and MultiDiscrete spaces")


def rows(values, dtype, width, np):
    values = np.asarray(values)
    if dtype == "f32":
        values = values.astype(np.float32).astype(np.float64)
    else:
        values = values.astype(np.int64)
    values = values.reshape(len(values), width)
    return values[:, 0].tolist() if width == 1 else values.tolist()


def main():
    if len(sys.argv) < 2:
        fail("usage: rlx_minari.py <data path> [describe]")
    try:
        import numpy as np
        from minari.dataset.minari_dataset import MinariDataset
    except ImportError as e:
        fail(f"cannot import minari ({e}): run `{sys.executable} -m pip install 'minari[hdf5,arrow]'`, or set RLX_PYTHON to an interpreter that has it")
    try:
        dataset = MinariDataset(sys.argv[1])
    except Exception as e:  # Minari's own errors name the problem
        fail(f"{sys.argv[1]}: not a Minari dataset Minari can read: {e}")
    obs_space, obs_type, obs_width = space_json(dataset.observation_space, np)
    act_space, act_type, act_width = space_json(dataset.action_space, np)
    columns = {
        "obs": {"dtype": obs_type, "width": obs_width},
        "new_obs": {"dtype": obs_type, "width": obs_width},
        "actions": {"dtype": act_type, "width": act_width},
        "rewards": {"dtype": "f32", "width": 1},
        "terminateds": {"dtype": "f32", "width": 1},
        "truncateds": {"dtype": "f32", "width": 1},
    }
    info = {
        "format": "rlx-experience",
        "version": 1,
        "observation_space": obs_space,
        "action_space": act_space,
        "columns": columns,
        "filtered_observations": False,
    }
    print(json.dumps(info, allow_nan=False), flush=True)
    if sys.argv[2:] == ["describe"]:
        return
    out = sys.stdout
    for episode in dataset.iterate_episodes():
        n = len(episode.rewards)
        if n == 0:
            continue
        obs = rows(episode.observations, obs_type, obs_width, np)
        line = {
            "type": "SampleBatch",
            "eps_id": [int(episode.id)] * n,
            "t": list(range(n)),
            "obs": obs[:n],
            "new_obs": obs[1 : n + 1],
            "actions": rows(episode.actions, act_type, act_width, np),
            "rewards": rows(episode.rewards, "f32", 1, np),
            "terminateds": rows(episode.terminations, "f32", 1, np),
            "truncateds": rows(episode.truncations, "f32", 1, np),
        }
        try:
            out.write(json.dumps(line, allow_nan=False))
        except ValueError:
            fail(f"episode {episode.id} holds a NaN or infinite value, which rlx's experience cannot hold")
        out.write("\n")
    out.flush()


if __name__ == "__main__":
    main()
