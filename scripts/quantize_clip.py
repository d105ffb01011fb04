"""Opt-in int8 CLIP image encoder for `lsplat-engine preprocess`: ONNX Runtime's
dynamic quantisation (`onnxruntime.quantization.quantize_dynamic`, int8 weights,
activations quantised per run) of a CLIP folder's `image.onnx`, written beside it as
`image.int8.onnx`. Use it with `--set preprocess.clip_image_file=image.int8.onnx`.

It changes the features: on ViT-B/16 with random weights and real photo crops they
stayed within cosine 0.9986 of float32 (1 893 crops) and the run used less CPU time
(docs/PERFORMANCE.md, "`preprocess` with SAM's real architectures"); check the deviation on your
own weights with benches/preprocess_sam.sh's comparison before relying on it.

    python scripts/quantize_clip.py CLIP_DIR [--input image.onnx] [--output image.int8.onnx]
"""
import argparse
import os

from onnxruntime.quantization import QuantType, quantize_dynamic


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("clip_dir")
    ap.add_argument("--input", default="image.onnx")
    ap.add_argument("--output", default="image.int8.onnx")
    a = ap.parse_args()
    src = os.path.join(a.clip_dir, a.input)
    dst = os.path.join(a.clip_dir, a.output)
    if not os.path.isfile(src):
        raise SystemExit(f"{src}: no such file")
    tmp = dst + f".tmp{os.getpid()}"
    quantize_dynamic(src, tmp, weight_type=QuantType.QInt8)
    os.replace(tmp, dst)
    print(f"wrote {dst} (dynamic int8 of {src})")


if __name__ == "__main__":
    main()
