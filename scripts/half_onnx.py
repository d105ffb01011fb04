"""Opt-in half-precision copies of SAM and CLIP model folders for `lsplat-engine
preprocess` on a GPU: every `.onnx` file of SRC_DIR is converted to float16 inside
(ONNX Runtime's `convert_float_to_float16`, with float32 inputs and outputs kept, so
the folder still meets the contract of docs/formats.md) and written to DST_DIR, with
the folder's other files (a CLIP vocabulary, a README) copied. Use DST_DIR as `--sam`
or `--clip`.

Half precision is for GPUs (tensor cores). It changes the outputs: mask logits near 0
may flip pixels and CLIP features move (on the random-weight models of the tests,
cosine ≥ 0.99 to float32); check the deviation on your own weights with
benches/preprocess_sam.sh (HALF=1) before relying on it. On a CPU it is usually slower.

    python scripts/half_onnx.py SRC_DIR DST_DIR [--force]

DST_DIR is written whole or not at all (a temporary folder beside it, renamed when
done); an existing DST_DIR is an error unless --force.
"""
import argparse
import os
import shutil
import sys

import onnx
from onnx.external_data_helper import load_external_data_for_model
from onnxruntime.transformers.float16 import convert_float_to_float16

# Protocol buffers cannot hold more than 2 GiB: larger models keep their weights in
# one external file beside the graph, as SAM ViT-H's export does.
# (HALF_ONNX_EXTERNAL_ABOVE lowers it, so that the tests take that path on small models.)
EXTERNAL_ABOVE = int(os.environ.get("HALF_ONNX_EXTERNAL_ABOVE", 1 << 30))


def convert(src, dst, external_bytes):
    if os.path.getsize(src) + external_bytes < EXTERNAL_ABOVE:
        model = onnx.load(src)
        half = convert_float_to_float16(model, keep_io_types=True)
    else:
        # Too large to serialise for the converter's shape inference: infer from the
        # file (which leaves the weights where they are), then read the weights.
        shapes = dst + ".shapes"
        onnx.shape_inference.infer_shapes_path(src, shapes)
        model = onnx.load(shapes, load_external_data=False)
        os.remove(shapes)
        load_external_data_for_model(model, os.path.dirname(os.path.abspath(src)))
        half = convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=True)
    if half.ByteSize() > EXTERNAL_ABOVE:
        onnx.save(half, dst, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=os.path.basename(dst) + ".data")
    else:
        onnx.save(half, dst)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src_dir")
    ap.add_argument("dst_dir")
    ap.add_argument("--force", action="store_true", help="replace an existing DST_DIR")
    a = ap.parse_args()
    src, dst = a.src_dir.rstrip("/"), a.dst_dir.rstrip("/")
    if not os.path.isdir(src):
        sys.exit(f"{src}: no such folder")
    models = sorted(f for f in os.listdir(src) if f.endswith(".onnx"))
    if not models:
        sys.exit(f"{src}: no .onnx file (a SAM folder holds encoder.onnx and decoder.onnx, a CLIP folder image.onnx)")
    if os.path.abspath(src) == os.path.abspath(dst):
        sys.exit(f"{dst}: the destination must not be the source folder")
    if os.path.exists(dst) and not a.force:
        sys.exit(f"{dst}: already exists (--force replaces it)")
    # Weights stored beside a graph are read through it, not copied as they are.
    external, external_bytes = set(), {}
    for f in models:
        files = set()
        for t in onnx.load(os.path.join(src, f), load_external_data=False).graph.initializer:
            files.update(e.value for e in t.external_data if e.key == "location")
        missing = [e for e in files if not os.path.isfile(os.path.join(src, e))]
        if missing:
            sys.exit(f"{os.path.join(src, f)}: its weights file {missing[0]} is not beside it")
        external |= files
        external_bytes[f] = sum(os.path.getsize(os.path.join(src, e)) for e in files)
    tmp = f"{dst}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        for f in sorted(os.listdir(src)):
            path = os.path.join(src, f)
            if f in models:
                convert(path, os.path.join(tmp, f), external_bytes[f])
                print(f"{f}: float16 inside, float32 inputs and outputs")
            elif f not in external and os.path.isfile(path):
                shutil.copy2(path, os.path.join(tmp, f))
        # onnx writes external weights readable by their owner only; give every file
        # the permissions a new file gets here.
        mask = os.umask(0)
        os.umask(mask)
        for f in os.listdir(tmp):
            os.chmod(os.path.join(tmp, f), 0o666 & ~mask)
        if os.path.exists(dst):
            shutil.rmtree(dst)
        os.replace(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
