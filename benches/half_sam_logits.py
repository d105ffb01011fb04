"""How far a float16 SAM folder (scripts/half_onnx.py) is from its float32 original on
one photo, through ONNX Runtime's CPU provider: the encoder's embeddings, and the
decoder's low-resolution mask logits and IoU predictions for 64 random point prompts
fed the same (float32) embeddings. Mask pixels follow the logits' sign, so the share
of logits that change sign is the share of low-resolution mask pixels that move.

    python benches/half_sam_logits.py SAM_DIR SAM_FP16_DIR IMAGE [--threads 2]
"""
import argparse

import cv2
import numpy as np
import onnxruntime as ort

MEAN = np.array([123.675, 116.28, 103.53], np.float32)
STD = np.array([58.395, 57.12, 57.375], np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sam32")
    ap.add_argument("sam16")
    ap.add_argument("image")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = a.threads

    def session(folder, name):
        return ort.InferenceSession(f"{folder}/{name}.onnx", opts, providers=["CPUExecutionProvider"])

    im = cv2.imread(a.image)
    if im is None:
        raise SystemExit(f"{a.image}: not an image OpenCV reads")
    im = im[:, :, ::-1].astype(np.float32)
    enc32 = session(a.sam32, "encoder")
    side = enc32.get_inputs()[0].shape[-1]
    h, w = im.shape[:2]
    s = side / max(h, w)
    nh, nw = int(h * s + 0.5), int(w * s + 0.5)
    x = np.zeros((1, 3, side, side), np.float32)
    x[0, :, :nh, :nw] = ((cv2.resize(im, (nw, nh)) - MEAN) / STD).transpose(2, 0, 1)
    e32 = enc32.run(None, {"image": x})[0]
    e16 = session(a.sam16, "encoder").run(None, {"image": x})[0]
    d = e32 - e16
    print(f"embeddings: rms difference {np.sqrt((d ** 2).mean()):.4g} (rms value {np.sqrt((e32 ** 2).mean()):.4g}), "
          f"max {np.abs(d).max():.4g}")
    rng = np.random.default_rng(0)
    feed = {
        "image_embeddings": e32,
        "point_coords": (rng.random((64, 1, 2)) * [nw, nh]).astype(np.float32),
        "point_labels": np.ones((64, 1), np.float32),
    }
    m32, iou32 = session(a.sam32, "decoder").run(None, feed)
    m16, iou16 = session(a.sam16, "decoder").run(None, feed)
    print(f"mask logits: max difference {np.abs(m32 - m16).max():.4g} (largest logit {np.abs(m32).max():.4g}), "
          f"{((m32 > 0) != (m16 > 0)).mean():.3%} change sign; IoU predictions: max difference "
          f"{np.abs(iou32 - iou16).max():.4g}")


if __name__ == "__main__":
    main()
