"""A Parquet dataset of image observations at least `--gb` GB on disk, for
the streaming benchmark (benches/offline/stream.sh): the schema and
`_dataset.json` of a small dataset rlx wrote (`--like`), rows of random
pixels (incompressible, so the bytes on disk are the bytes read), in
episodes of 1,000 steps whose `new_obs` is the next row's `obs`.

    python make_big_dataset.py --like <small rlx dataset> --out <dir> --gb 8

Needs pyarrow and numpy.
"""
import argparse
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

p = argparse.ArgumentParser()
p.add_argument("--like", required=True)
p.add_argument("--out", required=True)
p.add_argument("--gb", type=float, default=8.0)
p.add_argument("--rows-per-file", type=int, default=4000)
a = p.parse_args()

sample = next(f for f in sorted(os.listdir(a.like)) if f.endswith(".parquet"))
schema = pq.read_schema(os.path.join(a.like, sample))
os.makedirs(a.out, exist_ok=True)
shutil.copy(os.path.join(a.like, "_dataset.json"), os.path.join(a.out, "_dataset.json"))
width = schema.field("obs").type.list_size
rng = np.random.default_rng(0)
episode, written, index = 0, 0, 0
while written < a.gb * 1e9:
    n = a.rows_per_file
    frames = rng.integers(0, 2, size=(n + 1, width), dtype=np.uint8)
    t = np.arange(n) % 1000
    eps = episode + np.arange(n) // 1000
    episode += n // 1000
    last = (t == 999).astype(np.float32)
    columns = {}
    for field in schema:
        name = field.name
        if name in ("obs", "new_obs"):
            values = (frames[:-1] if name == "obs" else frames[1:]).reshape(-1)
            columns[name] = pa.FixedSizeListArray.from_arrays(pa.array(values, type=field.type.value_type), width)
        elif name == "eps_id":
            columns[name] = pa.array(eps, type=field.type)
        elif name == "t":
            columns[name] = pa.array(t, type=field.type)
        elif name == "truncateds":
            columns[name] = pa.array(last, type=field.type)
        elif name == "actions":
            columns[name] = pa.array(rng.integers(0, 4, size=n), type=field.type)
        elif pa.types.is_fixed_size_list(field.type):
            values = np.zeros(n * field.type.list_size)
            columns[name] = pa.FixedSizeListArray.from_arrays(
                pa.array(values, type=field.type.value_type), field.type.list_size)
        else:
            columns[name] = pa.array(np.zeros(n), type=field.type)
    table = pa.table(columns, schema=schema)
    path = os.path.join(a.out, f"random-{index:04d}.parquet")
    pq.write_table(table, path, compression="none", use_dictionary=False, row_group_size=256)
    written += os.path.getsize(path)
    index += 1
print(f"{index} files, {written / 1e9:.2f} GB, {index * a.rows_per_file} rows")
