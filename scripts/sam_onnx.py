"""Synthetic SAM models on lsplat-engine's SAM contract (docs/formats.md), built with
the `onnx` package, for tests: no weights exist on the test machines and CI does not
install torch (several GB), so these graphs stand in for an exported SAM.

- encoder.onnx: `image` [1, 3, S, S] -> `image_embeddings` [1, C, S/16, S/16]
  (16×16 average pooling and a seeded 1×1 convolution).
- decoder.onnx: `image_embeddings`, `point_coords` [B, 1, 2], `point_labels` [B, 1]
  -> `low_res_masks` [B, 3, M, M] (M = S/4), `iou_predictions` [B, 3]: around each
  prompt three elliptic blobs in logit form (small, medium, large), their sizes,
  aspect, slope, a hole and the predicted IoU set by a hash of the point, so the
  generator's filters and NMS act; the IoU also depends on the embedding's mean.

With `--resize stretch` the folder also gets `sam.json` declaring EfficientSAM's input
resize (the graphs are the same: the blobs lie in the encoder's frame either way).

With `--iou-base` below its default of 0.55 fewer prompts pass a generator's
`pred_iou_thresh`, which keeps O(M²) reference code practical at 32 points per side.

Usage: sam_onnx.py OUT_DIR [--side 1024] [--channels 8] [--seed 0] [--iou-base 0.55]
                   [--resize stretch]
"""
import argparse
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def const(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def encoder(side, channels, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((channels, 3, 1, 1)).astype(np.float32) * 0.5
    nodes = [
        helper.make_node("AveragePool", ["image"], ["pooled"], kernel_shape=[16, 16], strides=[16, 16]),
        helper.make_node("Conv", ["pooled", "w"], ["image_embeddings"]),
    ]
    g = helper.make_graph(
        nodes, "synthetic_sam_encoder",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, side, side])],
        [helper.make_tensor_value_info("image_embeddings", TensorProto.FLOAT, [1, channels, side // 16, side // 16])],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def decoder(side, channels, iou_base=0.55):
    low = side // 4
    e = side // 16
    n = []
    inits = []

    def c(name, v):
        inits.append(const(name, v))
        return name

    def op(kind, ins, out, **kw):
        n.append(helper.make_node(kind, ins, [out], **kw))
        return out

    yy, xx = np.mgrid[0:low, 0:low].astype(np.float32)
    gx, gy = c("gx", xx[None, None]), c("gy", yy[None, None])
    # Point in low-resolution pixels, [B, 1] each.
    inits.append(numpy_helper.from_array(np.array([-1, 2], np.int64), "shape_b2"))
    p = op("Reshape", ["point_coords", "shape_b2"], "p")
    inits.append(numpy_helper.from_array(np.array([0], np.int64), "i0"))
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "i1"))
    inits.append(numpy_helper.from_array(np.array([2], np.int64), "i2"))
    x = op("Slice", [p, "i0", "i1", "i1"], "x")
    y = op("Slice", [p, "i1", "i2", "i1"], "y")
    s = c("s", low / side)
    half = c("half", 0.5)
    cx = op("Sub", [op("Mul", [op("Add", [x, half], "xh"), s], "xs"), half], "cx")
    cy = op("Sub", [op("Mul", [op("Add", [y, half], "yh"), s], "ys"), half], "cy")

    def u(j):
        k = np.array([[0.0, 1.0, 2.0]], np.float32) * 8.0 + j
        t = op("Add", [op("Add", [op("Mul", [x, c(f"a{j}", 0.129898)], f"tx{j}"),
                                    op("Mul", [y, c(f"b{j}", 0.78233)], f"ty{j}")], f"txy{j}"),
                       c(f"k{j}", k * 3.7719)], f"t{j}")
        v = op("Mul", [op("Sin", [t], f"sin{j}"), c(f"big{j}", 437.585453)], f"v{j}")
        return op("Sub", [v, op("Floor", [v], f"fl{j}")], f"u{j}")  # [B, 3] in [0, 1)

    u0, u1, u2, u3, u4 = (u(j) for j in range(5))
    r = op("Add", [c("rbase", [[2.0, 6.0, 14.0]]), op("Mul", [u0, c("rscale", [[3.0, 8.0, 20.0]])], "ru")], "r")
    a = op("Add", [c("a06", 0.6), op("Mul", [u1, c("a08", 0.8)], "au")], "a")
    rx = op("Mul", [r, a], "rx")
    ry = op("Div", [r, a], "ry")
    slope = op("Add", [c("s6", 6.0), op("Mul", [u2, c("s20", 20.0)], "su")], "slope")
    inits.append(numpy_helper.from_array(np.array([2, 3], np.int64), "ax23"))

    def grid4(v, name):  # [B, 3] or [B, 1] -> [B, 3|1, 1, 1]
        return op("Unsqueeze", [v, "ax23"], name)

    dx = op("Div", [op("Sub", [gx, grid4(cx, "cx4")], "dx0"), grid4(rx, "rx4")], "dx")
    dy = op("Div", [op("Sub", [gy, grid4(cy, "cy4")], "dy0"), grid4(ry, "ry4")], "dy")
    d = op("Add", [op("Mul", [dx, dx], "dx2"), op("Mul", [dy, dy], "dy2")], "d")
    lg = op("Mul", [grid4(slope, "slope4"), op("Sub", [c("one", 1.0), d], "omd")], "lg")
    # A hole at 0.4·rx right of the centre in blobs whose u4 > 0.6.
    hx = op("Sub", [gx, op("Add", [grid4(cx, "cx4b"), op("Mul", [grid4(rx, "rx4b"), c("f04", 0.4)], "hrx")], "hcx")], "hx")
    hy = op("Sub", [gy, grid4(cy, "cy4b")], "hy")
    hd = op("Add", [op("Mul", [hx, hx], "hx2"), op("Mul", [hy, hy], "hy2")], "hd")
    hole = op("Mul", [op("Exp", [op("Mul", [hd, c("mtwo", -2.0)], "hdm")], "hexp"), c("h40", 40.0)], "hole")
    on = op("Cast", [op("Greater", [grid4(u4, "u44"), c("p6", 0.6)], "hon")], "honf", to=TensorProto.FLOAT)
    lg2 = op("Sub", [lg, op("Mul", [hole, on], "hole_on")], "lg2")
    op("Clip", [lg2, c("lo", -20.0), c("hi", 20.0)], "low_res_masks")
    m = op("ReduceMean", ["image_embeddings"], "emb_mean", keepdims=0)
    shift = op("Mul", [op("Sigmoid", [m], "emb_sig"), c("m004", 0.04)], "shift")
    op("Sub", [op("Add", [c("i55", iou_base), op("Mul", [u3, c("i45", 0.45)], "iu")], "iou0"), shift], "iou_predictions")
    # point_labels is part of the contract; a real decoder reads it.
    op("Identity", ["point_labels"], "labels_unused")
    g = helper.make_graph(
        n, "synthetic_sam_decoder",
        [
            helper.make_tensor_value_info("image_embeddings", TensorProto.FLOAT, [1, channels, e, e]),
            helper.make_tensor_value_info("point_coords", TensorProto.FLOAT, ["B", 1, 2]),
            helper.make_tensor_value_info("point_labels", TensorProto.FLOAT, ["B", 1]),
        ],
        [
            helper.make_tensor_value_info("low_res_masks", TensorProto.FLOAT, ["B", 3, low, low]),
            helper.make_tensor_value_info("iou_predictions", TensorProto.FLOAT, ["B", 3]),
        ],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--side", type=int, default=1024)
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iou-base", type=float, default=0.55,
                    help="predicted IoU = this + 0.45·hash − a small shift from the embedding; "
                         "lower values let fewer masks pass a generator's pred_iou_thresh")
    ap.add_argument("--resize", choices=["longest_side", "stretch"], default=None,
                    help="write sam.json declaring this input resize")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    enc = encoder(a.side, a.channels, a.seed)
    dec = decoder(a.side, a.channels, a.iou_base)
    for m in (enc, dec):
        onnx.checker.check_model(m)
    onnx.save(enc, os.path.join(a.out, "encoder.onnx"))
    onnx.save(dec, os.path.join(a.out, "decoder.onnx"))
    if a.resize:
        with open(os.path.join(a.out, "sam.json"), "w") as f:
            json.dump({"resize": a.resize}, f)
    print(f"wrote {a.out}/encoder.onnx and decoder.onnx (S = {a.side}, M = {a.side // 4})")


if __name__ == "__main__":
    main()
