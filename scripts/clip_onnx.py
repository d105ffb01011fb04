"""CLIP encoders as ONNX graphs with random weights, and a NumPy reference of the same
math, for tests and benchmarks (no weights are downloaded; torch is not needed).

    python scripts/clip_onnx.py make OUT_DIR [--size tiny|tiny-512|vit-b-16] [--seed S]
        [--text-input NAME] [--context N] [--image-input NAME] [--image-dtype float32|float16]
    python scripts/clip_onnx.py reference OUT_DIR --ids IDS.i64 --pixels PIXELS.f32 --out EMB.json

`make` writes OUT_DIR/text.onnx and OUT_DIR/image.onnx on the engine's contract
(docs/formats.md) and copies open_clip's vocabulary beside them when open_clip_torch is
installed. The graphs follow open_clip's architecture: text: token + positional
embeddings, pre-LN residual attention blocks (causal mask, GELU MLP), ln_final, the
feature at each row's end-of-text token (the argmax of the ids), text projection;
image: 16×16 patch convolution, class token, positional embedding, ln_pre, blocks,
ln_post on the class token, projection. `vit-b-16` has ViT-B/16's sizes (text 512 wide,
12 layers, 8 heads, vocabulary 49 408, context 77; vision 768 wide, 12 layers, 12 heads,
output 512); `tiny-512` is `tiny` with a 512-D output. The other options break the
contract on purpose, for error tests.

`reference` reads the weights back from the ONNX files and computes the embeddings of
the given token ids `[B, 77]` (int64) and pixels `[B, 3, 224, 224]` (float32) in float64
NumPy: {"text": [[...]], "image": [[...]]}, not normalised.
"""
import argparse
import json
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SIZES = {
    # width, layers, heads, output for text and vision
    "tiny": dict(vocab=49408, ctx=77, tw=32, tl=2, th=4, vw=48, vl=2, vh=4, patch=16, out=24),
    "vit-b-16": dict(vocab=49408, ctx=77, tw=512, tl=12, th=8, vw=768, vl=12, vh=12, patch=16, out=512),
}
# tiny's towers with CLIP ViT-B/16's 512-D output (LangSplat's preprocess.py assumes 512)
SIZES["tiny-512"] = dict(SIZES["tiny"], out=512)
IMAGE = 224
OPSET = 17


class Graph:
    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def weight(self, name, shape, std):
        w = (self.rng.standard_normal(shape) * std).astype(np.float32)
        self.inits.append(numpy_helper.from_array(w, name))
        return name

    def const(self, value, dtype=np.int64):
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, kind, inputs, **attrs):
        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def layer_norm(self, x, prefix, width):
        g = prefix + ".weight"
        b = prefix + ".bias"
        self.inits.append(numpy_helper.from_array(
            (1 + 0.1 * self.rng.standard_normal(width)).astype(np.float32), g))
        self.inits.append(numpy_helper.from_array(
            (0.1 * self.rng.standard_normal(width)).astype(np.float32), b))
        return self.op("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-5)

    def linear(self, x, prefix, n_in, n_out, bias=True):
        w = self.weight(prefix + ".weight", (n_in, n_out), n_in ** -0.5)
        y = self.op("MatMul", [x, w])
        if bias:
            b = self.weight(prefix + ".bias", (n_out,), 0.02)
            y = self.op("Add", [y, b])
        return y

    def block(self, x, prefix, width, heads, mask):
        """x + attn(ln_1(x)); x + mlp(ln_2(x)); x is [B, T, W]."""
        dh = width // heads
        h = self.layer_norm(x, prefix + ".ln_1", width)
        qkv = self.linear(h, prefix + ".attn.in_proj", width, 3 * width)
        q, k, v = (self.name("q"), self.name("k"), self.name("v"))
        self.nodes.append(helper.make_node("Split", [qkv, self.const([width] * 3)], [q, k, v], axis=-1))
        shape = self.const([0, 0, heads, dh])

        def heads_first(t):
            return self.op("Transpose", [self.op("Reshape", [t, shape])], perm=[0, 2, 1, 3])

        q, k, v = heads_first(q), heads_first(k), heads_first(v)
        kt = self.op("Transpose", [k], perm=[0, 1, 3, 2])
        s = self.op("Mul", [self.op("MatMul", [q, kt]), self.const(np.float32(dh ** -0.5), np.float32)])
        if mask is not None:
            s = self.op("Add", [s, mask])
        a = self.op("MatMul", [self.op("Softmax", [s], axis=-1), v])
        a = self.op("Reshape", [self.op("Transpose", [a], perm=[0, 2, 1, 3]), self.const([0, 0, width])])
        x = self.op("Add", [x, self.linear(a, prefix + ".attn.out_proj", width, width)])
        h = self.layer_norm(x, prefix + ".ln_2", width)
        h = self.linear(h, prefix + ".mlp.c_fc", width, 4 * width)
        # Exact GELU (torch's nn.GELU): 0.5·x·(1 + erf(x/√2)).
        e = self.op("Erf", [self.op("Mul", [h, self.const(np.float32(2 ** -0.5), np.float32)])])
        h = self.op("Mul", [self.op("Mul", [h, self.op("Add", [e, self.const(np.float32(1), np.float32)])]),
                            self.const(np.float32(0.5), np.float32)])
        h = self.linear(h, prefix + ".mlp.c_proj", 4 * width, width)
        return self.op("Add", [x, h])

    def save(self, path, inputs, output, out_dim):
        out = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["B", out_dim])
        self.nodes.append(helper.make_node("Identity", [output], ["embedding"]))
        graph = helper.make_graph(self.nodes, "clip", inputs, [out], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.save(model, path)


def text_model(path, c, seed, input_name="input_ids", context=None):
    g = Graph(np.random.default_rng(seed))
    ctx = context or c["ctx"]
    w = c["tw"]
    ids = helper.make_tensor_value_info(input_name, TensorProto.INT64, ["B", ctx])
    emb = g.weight("token_embedding.weight", (c["vocab"], w), 0.02)
    x = g.op("Gather", [emb, input_name], axis=0)
    x = g.op("Add", [x, g.weight("positional_embedding", (ctx, w), 0.01)])
    mask = np.triu(np.full((ctx, ctx), -np.inf, dtype=np.float32), 1)
    g.inits.append(numpy_helper.from_array(mask, "attn_mask"))
    for i in range(c["tl"]):
        x = g.block(x, f"transformer.resblocks.{i}", w, c["th"], "attn_mask")
    x = g.layer_norm(x, "ln_final", w)
    # The feature at the end-of-text token: the first position of each row's largest id.
    eot = g.op("ArgMax", [input_name], axis=-1, keepdims=1)  # [B, 1]
    idx = g.op("Expand", [g.op("Unsqueeze", [eot, g.const([2])]),
                          g.op("Concat", [g.op("Shape", [eot]), g.const([w])], axis=0)])
    pooled = g.op("Squeeze", [g.op("GatherElements", [x, idx], axis=1), g.const([1])])
    y = g.op("MatMul", [pooled, g.weight("text_projection", (w, c["out"]), w ** -0.5)])
    g.save(path, [ids], y, c["out"])


def image_model(path, c, seed, input_name="pixel_values", dtype="float32"):
    g = Graph(np.random.default_rng(seed + 1))
    w, p = c["vw"], c["patch"]
    elem = TensorProto.FLOAT if dtype == "float32" else TensorProto.FLOAT16
    pix = helper.make_tensor_value_info(input_name, elem, ["B", 3, IMAGE, IMAGE])
    x = input_name if dtype == "float32" else g.op("Cast", [input_name], to=TensorProto.FLOAT)
    conv = g.weight("conv1.weight", (w, 3, p, p), (3 * p * p) ** -0.5)
    x = g.op("Conv", [x, conv], kernel_shape=[p, p], strides=[p, p])  # [B, W, 14, 14]
    x = g.op("Transpose", [g.op("Reshape", [x, g.const([0, w, -1])])], perm=[0, 2, 1])
    cls = g.weight("class_embedding", (1, 1, w), w ** -0.5)
    batch = g.op("Slice", [g.op("Shape", [x]), g.const([0]), g.const([1])])
    cls = g.op("Expand", [cls, g.op("Concat", [batch, g.const([1, w])], axis=0)])
    x = g.op("Concat", [cls, x], axis=1)
    n = (IMAGE // p) ** 2 + 1
    x = g.op("Add", [x, g.weight("positional_embedding", (n, w), w ** -0.5)])
    x = g.layer_norm(x, "ln_pre", w)
    for i in range(c["vl"]):
        x = g.block(x, f"transformer.resblocks.{i}", w, c["vh"], None)
    x = g.op("Squeeze", [g.op("Slice", [x, g.const([0]), g.const([1]), g.const([1])]), g.const([1])])
    x = g.layer_norm(x, "ln_post", w)
    y = g.op("MatMul", [x, g.weight("proj", (w, c["out"]), w ** -0.5)])
    g.save(path, [pix], y, c["out"])


# ---- the NumPy reference (float64) ----

def weights(path):
    return {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(path).graph.initializer}


def ln(x, W, prefix):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * W[prefix + ".weight"] + W[prefix + ".bias"]


def erf(x):
    from math import erf as e
    return np.vectorize(e)(x)


def block(x, W, prefix, heads, mask):
    B, T, w = x.shape
    dh = w // heads
    h = ln(x, W, prefix + ".ln_1")
    qkv = h @ W[prefix + ".attn.in_proj.weight"] + W[prefix + ".attn.in_proj.bias"]
    q, k, v = (qkv[..., i * w:(i + 1) * w].reshape(B, T, heads, dh).transpose(0, 2, 1, 3) for i in range(3))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)
    if mask is not None:
        s = s + mask
    s = np.exp(s - s.max(-1, keepdims=True))
    a = (s / s.sum(-1, keepdims=True)) @ v
    a = a.transpose(0, 2, 1, 3).reshape(B, T, w)
    x = x + a @ W[prefix + ".attn.out_proj.weight"] + W[prefix + ".attn.out_proj.bias"]
    h = ln(x, W, prefix + ".ln_2") @ W[prefix + ".mlp.c_fc.weight"] + W[prefix + ".mlp.c_fc.bias"]
    h = 0.5 * h * (1 + erf(h / np.sqrt(2)))
    return x + h @ W[prefix + ".mlp.c_proj.weight"] + W[prefix + ".mlp.c_proj.bias"]


def count_blocks(W):
    return len({k.split(".")[2] for k in W if k.startswith("transformer.resblocks.")})


def text_reference(W, ids, heads):
    ctx = ids.shape[1]
    x = W["token_embedding.weight"][ids] + W["positional_embedding"]
    mask = np.triu(np.full((ctx, ctx), -np.inf), 1)
    for i in range(count_blocks(W)):
        x = block(x, W, f"transformer.resblocks.{i}", heads, mask)
    x = ln(x, W, "ln_final")
    pooled = x[np.arange(len(ids)), ids.argmax(-1)]
    return pooled @ W["text_projection"]


def image_reference(W, pixels, heads, patch=16):
    B = pixels.shape[0]
    conv = W["conv1.weight"]  # [W, 3, p, p]
    g = IMAGE // patch
    patches = pixels.reshape(B, 3, g, patch, g, patch).transpose(0, 2, 4, 1, 3, 5).reshape(B, g * g, -1)
    x = patches @ conv.reshape(conv.shape[0], -1).T
    cls = np.broadcast_to(W["class_embedding"].reshape(1, 1, -1), (B, 1, x.shape[2]))
    x = np.concatenate([cls, x], axis=1) + W["positional_embedding"]
    x = ln(x, W, "ln_pre")
    for i in range(count_blocks(W)):
        x = block(x, W, f"transformer.resblocks.{i}", heads, None)
    return ln(x[:, 0], W, "ln_post") @ W["proj"]


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make")
    mk.add_argument("out")
    mk.add_argument("--size", default="tiny", choices=sorted(SIZES))
    mk.add_argument("--seed", type=int, default=0)
    mk.add_argument("--text-input", default="input_ids")
    mk.add_argument("--context", type=int, default=None)
    mk.add_argument("--image-input", default="pixel_values")
    mk.add_argument("--image-dtype", default="float32", choices=["float32", "float16"])
    rf = sub.add_parser("reference")
    rf.add_argument("out")
    rf.add_argument("--size", default="tiny", choices=sorted(SIZES))
    rf.add_argument("--ids", required=True)
    rf.add_argument("--pixels", required=True)
    rf.add_argument("--json", required=True)
    a = ap.parse_args()
    c = SIZES[a.size]
    if a.cmd == "make":
        os.makedirs(a.out, exist_ok=True)
        text_model(os.path.join(a.out, "text.onnx"), c, a.seed, a.text_input, a.context)
        image_model(os.path.join(a.out, "image.onnx"), c, a.seed, a.image_input, a.image_dtype)
        try:
            import importlib.util
            spec = importlib.util.find_spec("open_clip")
            vocab = os.path.join(list(spec.submodule_search_locations)[0], "bpe_simple_vocab_16e6.txt.gz")
            shutil.copyfile(vocab, os.path.join(a.out, "bpe_simple_vocab_16e6.txt.gz"))
        except (AttributeError, TypeError, FileNotFoundError):
            print("open_clip_torch is not installed: no vocabulary copied")
    else:
        ids = np.fromfile(a.ids, dtype=np.int64).reshape(-1, c["ctx"])
        pixels = np.fromfile(a.pixels, dtype=np.float32).astype(np.float64).reshape(-1, 3, IMAGE, IMAGE)
        t = text_reference(weights(os.path.join(a.out, "text.onnx")), ids, c["th"])
        i = image_reference(weights(os.path.join(a.out, "image.onnx")), pixels, c["vh"], c["patch"])
        json.dump({"text": t.tolist(), "image": i.tolist()}, open(a.json, "w"))


if __name__ == "__main__":
    main()
