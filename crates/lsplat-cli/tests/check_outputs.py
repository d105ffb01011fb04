"""Reads what lsplat-engine wrote with the tools users already have (pyarrow, plyfile)
and checks schemas, row counts and values. Usage:
    python check_outputs.py <dataset dir> <run dir> <gaussians> <dim> <images>
Exits non-zero with a message on any mismatch."""
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from plyfile import PlyData

dataset, run, n, dim, images = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])

feats = pq.read_table(f"{dataset}/features.parquet")
assert feats.schema.field("image").type == pa.string(), feats.schema
assert feats.schema.field("level").type == pa.uint8(), feats.schema
assert feats.schema.field("mask_id").type == pa.uint32(), feats.schema
ft = feats.schema.field("feature").type
assert pa.types.is_fixed_size_list(ft) and ft.list_size == dim and ft.value_type == pa.float32(), ft
assert len(set(feats.column("image").to_pylist())) == images
rows = np.stack(feats.column("feature").to_numpy(zero_copy_only=False))
assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5), "mask features are unit vectors"

masks = pq.read_table(f"{dataset}/masks.parquet")
for col in ("image", "level", "height", "width"):
    assert col in masks.schema.names, masks.schema
assert masks.num_rows == images * 4, (masks.num_rows, images)

out = pq.read_table(f"{run}/features.parquet")
assert out.schema.field("gaussian").type == pa.uint32(), out.schema
ot = out.schema.field("feature").type
assert pa.types.is_fixed_size_list(ot) and ot.list_size == dim, ot
assert out.num_rows == n, (out.num_rows, n)
ids = out.column("gaussian").to_numpy()
assert (ids == np.arange(n)).all()
learned = np.stack(out.column("feature").to_numpy(zero_copy_only=False)).astype(np.float32)

ply = PlyData.read(f"{run}/splats.ply")
v = ply["vertex"]
assert v.count == n, (v.count, n)
names = [p.name for p in v.properties]
for p in ["x", "y", "z", "f_dc_0", "opacity", "scale_0", "rot_0"] + [f"f_lang_{k}" for k in range(dim)]:
    assert p in names, (p, names)
lang = np.stack([v[f"f_lang_{k}"] for k in range(dim)], axis=1)
assert np.array_equal(lang, learned), "PLY f_lang_* equal the Parquet features"
print(f"ok: dataset {feats.num_rows} feature rows, {masks.num_rows} mask rows; run {n} gaussians x {dim}")
