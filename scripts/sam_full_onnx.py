"""SAM's networks at their real architecture and size, with seeded random weights, as
ONNX graphs on lsplat-engine's SAM contract (docs/formats.md), built with the `onnx`
package (no torch, no downloaded weights): for benchmarks, and at tiny sizes for tests.

    python scripts/sam_full_onnx.py make OUT_DIR --encoder vit_h|vit_l|vit_b|vit_t|esam_ti|esam_s|tiny_vit|tiny_vit_t|tiny_esam
        [--decoder sam|tiny|esam|tiny_esam] [--seed S] [--iou-bias B] [--blobs]

writes OUT_DIR/encoder.onnx and OUT_DIR/decoder.onnx. Full-size graphs keep their
weights in ONNX external data (`encoder.onnx.data`, ViT-H: 2.5 GB), so the builder never
holds a 2 GB protobuf. Each file carries its configuration as JSON in the metadata key
`lsplat.sam`; scripts/sam_numpy.py reads it and the weights back and computes the same
functions in float64 NumPy.

The architectures follow segment-anything's modeling code and MobileSAM's TinyViT:

- `vit_h`, `vit_l`, `vit_b`: SAM's `ImageEncoderViT` (16×16 patches, absolute position
  embedding, pre-LN blocks with windowed attention (window 14, zero-padded 64 → 70)
  except the global blocks, decomposed relative positions, exact GELU MLP, LayerNorm
  eps 1e-6, neck 1×1 conv → LayerNorm2d → 3×3 conv → LayerNorm2d to 256 channels).
- `vit_t`: MobileSAM's TinyViT-5M (Conv2d_BN stem to 1/4, MBConv stage, patch merging,
  three stages of windowed attention with per-offset biases and a 3×3 depthwise
  local conv, the merge into the last stage at stride 1, the same neck). BatchNorm is
  kept as BatchNormalization nodes (eval mode) with random running statistics.
- decoder `sam`: SAM's `PromptEncoder` for one point plus the padding point
  (random-Fourier position encoding, point/not-a-point embeddings, the no-mask dense
  embedding) and `MaskDecoder` (two-way transformer depth 2, 8 heads, MLP 2048,
  attention downsampling 2, output upscaling by two transposed convolutions,
  hypernetwork MLPs, IoU head), multimask outputs 1–3, as
  `SamPredictor.predict_torch(multimask_output=True, return_logits=True)` before
  `postprocess_masks`.

- `esam_ti`, `esam_s` with decoder `esam`: EfficientSAM (efficient_sam/*.py): a plain
  ViT (global attention in every block, no relative positions, the position embedding
  stored at 64×64 where EfficientSAM interpolates its 14×14 one), SAM's neck; its
  prompt encoder (the point padded to six slots with label −1, the padding's position
  encoding kept, one embedding per label, no dense embedding); its two-way transformer
  (GELU MLP, residual self-attention in every layer with the positions added to the
  queries themselves), GroupNorm(1) in the upscaling, GELU in the hypernetwork and IoU
  MLPs. The folder also gets `sam.json` (`"resize": "stretch"`).

`tiny_vit`, `tiny_vit_t` (with decoder `tiny`) and `tiny_esam` (decoder `tiny_esam`) take the same code paths at S = 128
(padded windows, global blocks, TinyViT's padded, unpadded and single-window stages) so
a test can compare them with the NumPy reference in a second. Linear weights are
stored as MatMul operands, `[in, out]` (the transpose of torch's `[out, in]`).
`--iou-bias` is added to the IoU head's last bias (random weights predict IoUs around
0, which the generator's 0.7 threshold drops). `--blobs` (benchmarks) keeps SAM's
decoder computation but outputs scripts/sam_onnx.py's synthetic blobs, so the steps after
the decoder see realistic numbers of masks.
"""
import argparse
import json
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17

ENCODERS = {
    "vit_h": dict(kind="vit", side=1024, patch=16, embed=1280, depth=32, heads=16,
                  global_attn=[7, 15, 23, 31], window=14, out_chans=256),
    "vit_l": dict(kind="vit", side=1024, patch=16, embed=1024, depth=24, heads=16,
                  global_attn=[5, 11, 17, 23], window=14, out_chans=256),
    "vit_b": dict(kind="vit", side=1024, patch=16, embed=768, depth=12, heads=12,
                  global_attn=[2, 5, 8, 11], window=14, out_chans=256),
    "vit_t": dict(kind="tinyvit", side=1024, dims=[64, 128, 160, 320], depths=[2, 2, 6, 2],
                  heads=[2, 4, 5, 10], windows=[7, 7, 14, 7], out_chans=256),
    "tiny_vit": dict(kind="vit", side=128, patch=16, embed=32, depth=4, heads=2,
                     global_attn=[1, 3], window=3, out_chans=32),
    "tiny_vit_t": dict(kind="tinyvit", side=128, dims=[8, 16, 20, 32], depths=[1, 2, 2, 1],
                       heads=[1, 2, 2, 4], windows=[7, 7, 4, 8], out_chans=32),
    # EfficientSAM: a plain ViT (global attention everywhere, no relative positions).
    "esam_ti": dict(kind="vit", family="efficient_sam", side=1024, patch=16, embed=192, depth=12,
                    heads=3, global_attn=list(range(12)), window=0, rel_pos=False, out_chans=256),
    "esam_s": dict(kind="vit", family="efficient_sam", side=1024, patch=16, embed=384, depth=12,
                   heads=6, global_attn=list(range(12)), window=0, rel_pos=False, out_chans=256),
    "tiny_esam": dict(kind="vit", family="efficient_sam", side=128, patch=16, embed=32, depth=2,
                      heads=2, global_attn=[0, 1], window=0, rel_pos=False, out_chans=32),
}
DECODERS = {
    "sam": dict(dim=256, heads=8, mlp=2048, depth=2, iou_hidden=256, downsample=2, tokens=4),
    "tiny": dict(dim=32, heads=4, mlp=64, depth=2, iou_hidden=32, downsample=2, tokens=4),
    "esam": dict(dim=256, heads=8, mlp=2048, depth=2, iou_hidden=256, downsample=2, tokens=4,
                 family="efficient_sam", points=6),
    "tiny_esam": dict(dim=32, heads=4, mlp=64, depth=2, iou_hidden=32, downsample=2, tokens=4,
                      family="efficient_sam", points=6),
}
MLP_RATIO = 4
MBCONV_EXPAND = 4
EXTERNAL_MIN_BYTES = 1 << 20


class Graph:
    """Nodes and initializers of one ONNX graph; large weights go to external data."""

    def __init__(self, rng, data_path=None):
        self.rng = rng
        self.nodes, self.inits, self.n = [], [], 0
        self.data_path = data_path
        self.data = open(data_path, "wb") if data_path else None

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def init(self, name, value):
        a = np.asarray(value)
        a = a if a.flags.c_contiguous else a.copy()
        if self.data is not None and a.nbytes >= EXTERNAL_MIN_BYTES:
            t = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(a.dtype), dims=a.shape)
            off = self.data.tell()
            pad = -off % 4096
            self.data.write(b"\0" * pad)
            off += pad
            self.data.write(a.tobytes())
            for k, v in (("location", os.path.basename(self.data_path)), ("offset", off), ("length", a.nbytes)):
                t.external_data.add(key=k, value=str(v))
            t.data_location = TensorProto.EXTERNAL
        else:
            t = numpy_helper.from_array(a, name)
        self.inits.append(t)
        return name

    def rand(self, name, shape, std, mean=0.0):
        w = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean)
        return self.init(name, w)

    def f32(self, v):
        return self.init(self.name("c"), np.asarray(v, np.float32))

    def i64(self, v):
        return self.init(self.name("c"), np.asarray(v, np.int64))

    def op(self, kind, inputs, n_out=1, **attrs):
        outs = [self.name(kind.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(kind, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    # Layers, named as torch's state dict names them.
    def linear(self, x, prefix, n_in, n_out, bias=True, bias_mean=0.0):
        y = self.op("MatMul", [x, self.rand(prefix + ".weight", (n_in, n_out), n_in ** -0.5)])
        if bias:
            y = self.op("Add", [y, self.rand(prefix + ".bias", (n_out,), 0.02, bias_mean)])
        return y

    def layer_norm(self, x, prefix, width, eps):
        g = self.rand(prefix + ".weight", (width,), 0.1, 1.0)
        b = self.rand(prefix + ".bias", (width,), 0.1)
        return self.op("LayerNormalization", [x, g, b], axis=-1, epsilon=eps)

    def layer_norm_2d(self, x, prefix, channels, eps=1e-6):
        """SAM's LayerNorm2d over the channels of [B, C, H, W], op by op as exported."""
        u = self.op("ReduceMean", [x], axes=[1], keepdims=1)
        d = self.op("Sub", [x, u])
        s = self.op("ReduceMean", [self.op("Pow", [d, self.f32(2.0)])], axes=[1], keepdims=1)
        y = self.op("Div", [d, self.op("Sqrt", [self.op("Add", [s, self.f32(eps)])])])
        g = self.rand(prefix + ".weight", (channels, 1, 1), 0.1, 1.0)
        b = self.rand(prefix + ".bias", (channels, 1, 1), 0.1)
        return self.op("Add", [self.op("Mul", [g, y]), b])

    def gelu(self, x):
        """torch's exact nn.GELU: 0.5·x·(1 + erf(x/√2))."""
        e = self.op("Erf", [self.op("Div", [x, self.f32(math.sqrt(2.0))])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.f32(1.0)])]), self.f32(0.5)])

    def conv(self, x, prefix, cin, cout, k, stride=1, pad=0, groups=1, bias=True):
        w = self.rand(prefix + ".weight", (cout, cin // groups, k, k), (cin // groups * k * k) ** -0.5)
        ins = [x, w] + ([self.rand(prefix + ".bias", (cout,), 0.02)] if bias else [])
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=groups)

    def conv_bn(self, x, prefix, cin, cout, k, stride=1, pad=0, groups=1):
        """TinyViT's Conv2d_BN: a bias-free conv, then BatchNorm2d in eval mode."""
        y = self.conv(x, prefix + ".c", cin, cout, k, stride, pad, groups, bias=False)
        p = prefix + ".bn"
        scale = self.rand(p + ".weight", (cout,), 0.1, 1.0)
        shift = self.rand(p + ".bias", (cout,), 0.1)
        mean = self.rand(p + ".running_mean", (cout,), 0.1)
        var = self.init(p + ".running_var", self.rng.uniform(0.5, 1.5, cout).astype(np.float32))
        return self.op("BatchNormalization", [y, scale, shift, mean, var], epsilon=1e-5)

    def model(self, inputs, outputs, name, meta):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8
        helper.set_model_props(m, {"lsplat.sam": json.dumps(meta)})
        if self.data is not None:
            self.data.close()
        return m


# --- SAM's ViT image encoder ---------------------------------------------------------

def rel_index(q, k):
    """segment-anything's get_rel_pos index for equal sizes: (i − j) + (k − 1)."""
    return (np.arange(q)[:, None] - np.arange(k)[None, :] + (k - 1)).astype(np.int64)


def vit_attention(g, x, prefix, dim, heads, size, rel_pos=True):
    """SAM's Attention on x [Bw, h, w, dim] with decomposed relative positions
    (EfficientSAM's without them)."""
    h, w = size
    hd = dim // heads
    qkv = g.linear(x, prefix + ".qkv", dim, 3 * dim)
    qkv = g.op("Reshape", [qkv, g.i64([-1, h * w, 3, heads, hd])])
    qkv = g.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
    qkv = g.op("Reshape", [qkv, g.i64([3, -1, h * w, hd])])
    q, k, v = (g.op("Squeeze", [t, g.i64([0])]) for t in g.op("Split", [qkv, g.i64([1, 1, 1])], n_out=3, axis=0))
    attn = g.op("MatMul", [g.op("Mul", [q, g.f32(hd ** -0.5)]), g.op("Transpose", [k], perm=[0, 2, 1])])
    if not rel_pos:
        out = g.op("MatMul", [g.op("Softmax", [attn], axis=-1), v])
        out = g.op("Reshape", [out, g.i64([-1, heads, h, w, hd])])
        out = g.op("Reshape", [g.op("Transpose", [out], perm=[0, 2, 3, 1, 4]), g.i64([-1, h, w, dim])])
        return g.linear(out, prefix + ".proj", dim, dim)
    rh = g.op("Gather", [g.rand(prefix + ".rel_pos_h", (2 * h - 1, hd), 0.5), g.i64(rel_index(h, h))], axis=0)
    rw = g.op("Gather", [g.rand(prefix + ".rel_pos_w", (2 * w - 1, hd), 0.5), g.i64(rel_index(w, w))], axis=0)
    rq = g.op("Reshape", [q, g.i64([-1, h, w, hd])])
    rel_h = g.op("Einsum", [rq, rh], equation="bhwc,hkc->bhwk")
    rel_w = g.op("Einsum", [rq, rw], equation="bhwc,wkc->bhwk")
    attn = g.op("Reshape", [attn, g.i64([-1, h, w, h, w])])
    attn = g.op("Add", [g.op("Add", [attn, g.op("Unsqueeze", [rel_h, g.i64([4])])]),
                        g.op("Unsqueeze", [rel_w, g.i64([3])])])
    attn = g.op("Softmax", [g.op("Reshape", [attn, g.i64([-1, h * w, h * w])])], axis=-1)
    out = g.op("MatMul", [attn, v])
    out = g.op("Reshape", [out, g.i64([-1, heads, h, w, hd])])
    out = g.op("Reshape", [g.op("Transpose", [out], perm=[0, 2, 3, 1, 4]), g.i64([-1, h, w, dim])])
    return g.linear(out, prefix + ".proj", dim, dim)


def windows(g, x, size, ws, channels, batch=1):
    """Zero-pad [B, H, W, C] to whole windows; return [B·nW, ws, ws, C] and (Hp, Wp)."""
    hh, ww = size
    ph, pw = (-hh) % ws, (-ww) % ws
    if ph or pw:
        x = g.op("Pad", [x, g.i64([0, 0, 0, 0, 0, ph, pw, 0])])
    hp, wp = hh + ph, ww + pw
    x = g.op("Reshape", [x, g.i64([batch, hp // ws, ws, wp // ws, ws, channels])])
    x = g.op("Transpose", [x], perm=[0, 1, 3, 2, 4, 5])
    return g.op("Reshape", [x, g.i64([-1, ws, ws, channels])]), (hp, wp)


def unwindows(g, x, size, padded, ws, channels, batch=1):
    (hh, ww), (hp, wp) = size, padded
    x = g.op("Reshape", [x, g.i64([batch, hp // ws, wp // ws, ws, ws, channels])])
    x = g.op("Transpose", [x], perm=[0, 1, 3, 2, 4, 5])
    x = g.op("Reshape", [x, g.i64([batch, hp, wp, channels])])
    if (hp, wp) != (hh, ww):
        x = g.op("Slice", [x, g.i64([0, 0]), g.i64([hh, ww]), g.i64([1, 2])])
    return x


def vit_encoder(g, c):
    e, grid = c["embed"], c["side"] // c["patch"]
    x = g.conv("image", "patch_embed.proj", 3, e, c["patch"], stride=c["patch"])
    x = g.op("Transpose", [x], perm=[0, 2, 3, 1])
    x = g.op("Add", [x, g.rand("pos_embed", (1, grid, grid, e), 0.1)])
    for i in range(c["depth"]):
        p = f"blocks.{i}"
        ws = 0 if i in c["global_attn"] else c["window"]
        h = g.layer_norm(x, p + ".norm1", e, 1e-6)
        if ws:
            h, padded = windows(g, h, (grid, grid), ws, e)
            h = vit_attention(g, h, p + ".attn", e, c["heads"], (ws, ws))
            h = unwindows(g, h, (grid, grid), padded, ws, e)
        else:
            h = vit_attention(g, h, p + ".attn", e, c["heads"], (grid, grid), c.get("rel_pos", True))
        x = g.op("Add", [x, h])
        h = g.layer_norm(x, p + ".norm2", e, 1e-6)
        h = g.linear(g.gelu(g.linear(h, p + ".mlp.lin1", e, MLP_RATIO * e)), p + ".mlp.lin2", MLP_RATIO * e, e)
        x = g.op("Add", [x, h])
    return neck(g, g.op("Transpose", [x], perm=[0, 3, 1, 2]), e, c["out_chans"])


def neck(g, x, cin, out):
    x = g.layer_norm_2d(g.conv(x, "neck.0", cin, out, 1, bias=False), "neck.1", out)
    x = g.conv(x, "neck.2", out, out, 3, pad=1, bias=False)
    return g.layer_norm_2d(x, "neck.3", out)


# --- MobileSAM's TinyViT image encoder -----------------------------------------------

def offset_index(ws):
    """TinyViT's attention_bias_idxs: each (|dy|, |dx|) numbered in order of first use."""
    pts = [(i, j) for i in range(ws) for j in range(ws)]
    seen, idx = {}, []
    for a in pts:
        for b in pts:
            o = (abs(a[0] - b[0]), abs(a[1] - b[1]))
            idx.append(seen.setdefault(o, len(seen)))
    return np.array(idx, np.int64).reshape(len(pts), len(pts)), len(seen)


def tiny_attention(g, x, prefix, dim, heads, ws):
    """TinyViT's Attention (key_dim = dim/heads, attn_ratio 1) on x [Bw, ws², dim]."""
    hd = dim // heads
    idx, n_off = offset_index(ws)
    x = g.layer_norm(x, prefix + ".norm", dim, 1e-5)
    qkv = g.op("Reshape", [g.linear(x, prefix + ".qkv", dim, 3 * dim), g.i64([0, 0, heads, 3 * hd])])
    q, k, v = (g.op("Transpose", [t], perm=[0, 2, 1, 3])
               for t in g.op("Split", [qkv, g.i64([hd, hd, hd])], n_out=3, axis=3))
    attn = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), g.f32(hd ** -0.5)])
    bias = g.op("Gather", [g.rand(prefix + ".attention_biases", (heads, n_off), 0.5), g.i64(idx)], axis=1)
    attn = g.op("Softmax", [g.op("Add", [attn, bias])], axis=-1)
    out = g.op("Transpose", [g.op("MatMul", [attn, v])], perm=[0, 2, 1, 3])
    return g.linear(g.op("Reshape", [out, g.i64([0, 0, dim])]), prefix + ".proj", dim, dim)


def tiny_block(g, x, prefix, dim, res, heads, ws):
    """TinyViTBlock on tokens [1, H·W, dim]."""
    hh, ww = res
    if hh == ws and ww == ws:
        a = tiny_attention(g, x, prefix + ".attn", dim, heads, ws)
    else:
        t = g.op("Reshape", [x, g.i64([1, hh, ww, dim])])
        t, padded = windows(g, t, res, ws, dim)
        t = g.op("Reshape", [t, g.i64([-1, ws * ws, dim])])
        t = tiny_attention(g, t, prefix + ".attn", dim, heads, ws)
        t = g.op("Reshape", [t, g.i64([-1, ws, ws, dim])])
        a = g.op("Reshape", [unwindows(g, t, res, padded, ws, dim), g.i64([1, hh * ww, dim])])
    x = g.op("Add", [x, a])
    t = g.op("Reshape", [g.op("Transpose", [x], perm=[0, 2, 1]), g.i64([1, dim, hh, ww])])
    t = g.conv_bn(t, prefix + ".local_conv", dim, dim, 3, pad=1, groups=dim)
    x = g.op("Transpose", [g.op("Reshape", [t, g.i64([1, dim, hh * ww])])], perm=[0, 2, 1])
    m = g.layer_norm(x, prefix + ".mlp.norm", dim, 1e-5)
    m = g.linear(g.gelu(g.linear(m, prefix + ".mlp.fc1", dim, MLP_RATIO * dim)),
                 prefix + ".mlp.fc2", MLP_RATIO * dim, dim)
    return g.op("Add", [x, m])


def patch_merging(g, x, prefix, res, dim, out, stride, tokens):
    """TinyViT's PatchMerging (1×1, depthwise 3×3 at `stride`, 1×1) to tokens."""
    if tokens:
        x = g.op("Transpose", [g.op("Reshape", [x, g.i64([1, res, res, dim])])], perm=[0, 3, 1, 2])
    x = g.gelu(g.conv_bn(x, prefix + ".conv1", dim, out, 1))
    x = g.gelu(g.conv_bn(x, prefix + ".conv2", out, out, 3, stride, 1, groups=out))
    x = g.conv_bn(x, prefix + ".conv3", out, out, 1)
    return g.op("Transpose", [g.op("Reshape", [x, g.i64([1, out, -1])])], perm=[0, 2, 1])


def tinyvit_encoder(g, c):
    d = c["dims"]
    x = g.gelu(g.conv_bn("image", "patch_embed.seq.0", 3, d[0] // 2, 3, 2, 1))
    x = g.conv_bn(x, "patch_embed.seq.2", d[0] // 2, d[0], 3, 2, 1)
    res0 = c["side"] // 4
    for b in range(c["depths"][0]):  # MBConv blocks
        p = f"layers.0.blocks.{b}"
        hid = d[0] * MBCONV_EXPAND
        t = g.gelu(g.conv_bn(x, p + ".conv1", d[0], hid, 1))
        t = g.gelu(g.conv_bn(t, p + ".conv2", hid, hid, 3, 1, 1, groups=hid))
        t = g.conv_bn(t, p + ".conv3", hid, d[0], 1)
        x = g.gelu(g.op("Add", [t, x]))
    x = patch_merging(g, x, "layers.0.downsample", res0, d[0], d[1], 2, tokens=False)
    for i in range(1, 4):
        res = res0 // 2 ** (i - 1 if i == 3 else i)
        for b in range(c["depths"][i]):
            x = tiny_block(g, x, f"layers.{i}.blocks.{b}", d[i], (res, res), c["heads"][i], c["windows"][i])
        if i < 3:
            # MobileSAM merges into the last stage at stride 1 (its out_dim 320 rule).
            stride = 1 if i == 2 else 2
            x = patch_merging(g, x, f"layers.{i}.downsample", res, d[i], d[i + 1], stride, tokens=True)
    grid = c["side"] // 16
    x = g.op("Transpose", [g.op("Reshape", [x, g.i64([1, grid, grid, d[3]])])], perm=[0, 3, 1, 2])
    return neck(g, x, d[3], c["out_chans"])


def encoder_model(c, seed, data_path):
    g = Graph(np.random.default_rng(seed), data_path)
    out = vit_encoder(g, c) if c["kind"] == "vit" else tinyvit_encoder(g, c)
    g.nodes.append(helper.make_node("Identity", [out], ["image_embeddings"]))
    s, e = c["side"], c["side"] // 16
    return g.model(
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, s, s])],
        [helper.make_tensor_value_info("image_embeddings", TensorProto.FLOAT, [1, c["out_chans"], e, e])],
        "sam_image_encoder", c)


# --- SAM's prompt encoder and mask decoder -------------------------------------------

def fourier(g, coords, gauss):
    """PositionEmbeddingRandom._pe_encoding of coords in [0, 1] (last axis x, y)."""
    c = g.op("Sub", [g.op("Mul", [coords, g.f32(2.0)]), g.f32(1.0)])
    c = g.op("Mul", [g.op("MatMul", [c, gauss]), g.f32(2 * np.pi)])
    return g.op("Concat", [g.op("Sin", [c]), g.op("Cos", [c])], axis=-1)


def attention(g, q, k, v, prefix, dim, heads, down):
    """The two-way transformer's Attention (projections to dim/down, heads, out_proj)."""
    inner = dim // down

    def split(t, name):
        t = g.linear(t, f"{prefix}.{name}_proj", dim, inner)
        return g.op("Transpose", [g.op("Reshape", [t, g.i64([0, 0, heads, inner // heads])])], perm=[0, 2, 1, 3])

    q, k, v = split(q, "q"), split(k, "k"), split(v, "v")
    a = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
    a = g.op("Softmax", [g.op("Div", [a, g.f32(math.sqrt(inner // heads))])], axis=-1)
    o = g.op("Transpose", [g.op("MatMul", [a, v])], perm=[0, 2, 1, 3])
    return g.linear(g.op("Reshape", [o, g.i64([0, 0, inner])]), prefix + ".out_proj", inner, dim)


def mlp(g, x, prefix, dims, relu_last=False, gelu=False):
    """SAM's MLP (ReLU between layers); EfficientSAM's MLPBlock is the same with GELU."""
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        x = g.linear(x, f"{prefix}.layers.{i}", a, b)
        if i < len(dims) - 2 or relu_last:
            x = g.gelu(x) if gelu else g.op("Relu", [x])
    return x


def sam_points(g, gauss, side, d):
    """SAM's PromptEncoder for one point: the point and a padding point (label −1, its
    position encoding zeroed), plus the embedding of each label; and the no-mask dense
    embedding."""
    pts = g.op("Add", ["point_coords", g.f32(0.5)])
    pad_pt = g.op("Expand", [g.f32(np.zeros((1, 1, 2))), g.op("Shape", ["point_coords"])])
    pad_lab = g.op("Expand", [g.f32(-np.ones((1, 1))), g.op("Shape", ["point_labels"])])
    coords = g.op("Concat", [pts, pad_pt], axis=1)
    labels = g.op("Unsqueeze", [g.op("Concat", ["point_labels", pad_lab], axis=1), g.i64([2])])
    pe = fourier(g, g.op("Div", [coords, g.f32([side, side])]), gauss)

    def is_label(v):
        return g.op("Equal", [labels, g.f32(v)])

    pad = is_label(-1.0)
    sparse = g.op("Where", [pad, g.f32(0.0), pe])
    for v, name in ((-1.0, "prompt_encoder.not_a_point_embed.weight"),
                    (0.0, "prompt_encoder.point_embeddings.0.weight"),
                    (1.0, "prompt_encoder.point_embeddings.1.weight")):
        w = g.rand(name, (1, d), 1.0)
        sparse = g.op("Add", [sparse, g.op("Mul", [g.op("Cast", [is_label(v)], to=TensorProto.FLOAT), w])])
    no_mask = g.rand("prompt_encoder.no_mask_embed.weight", (1, d), 1.0)
    return sparse, no_mask


def efficient_sam_points(g, gauss, side, d, n_points):
    """EfficientSAM's PromptEncoder for one point padded to its n_points slots: the
    padding has coordinates −1 and label −1; +0.5, the position encoding (not zeroed
    for padding), plus the embedding of each label (−1 invalid, 1 point, 2, 3 box)."""
    batch = g.op("Slice", [g.op("Shape", ["point_coords"]), g.i64([0]), g.i64([1])])
    npad = n_points - 1
    pad_pt = g.op("Expand", [g.f32(-np.ones((1, 1, 2))), g.op("Concat", [batch, g.i64([npad, 2])], axis=0)])
    pad_lab = g.op("Expand", [g.f32(-np.ones((1, 1))), g.op("Concat", [batch, g.i64([npad])], axis=0)])
    coords = g.op("Add", [g.op("Concat", ["point_coords", pad_pt], axis=1), g.f32(0.5)])
    labels = g.op("Unsqueeze", [g.op("Concat", ["point_labels", pad_lab], axis=1), g.i64([2])])
    sparse = fourier(g, g.op("Div", [coords, g.f32([side, side])]), gauss)
    for v, name in ((-1.0, "invalid_points"), (1.0, "point_embeddings"),
                    (2.0, "bbox_top_left_embeddings"), (3.0, "bbox_bottom_right_embeddings")):
        w = g.rand(f"prompt_encoder.{name}.weight", (1, d), 1.0)
        on = g.op("Cast", [g.op("Equal", [labels, g.f32(v)])], to=TensorProto.FLOAT)
        sparse = g.op("Add", [sparse, g.op("Mul", [on, w])])
    return sparse


def group_norm_1(g, x, prefix, channels, eps=1e-5):
    """nn.GroupNorm(1, C) on [B, C, H, W]: one mean and variance per sample."""
    u = g.op("ReduceMean", [x], axes=[1, 2, 3], keepdims=1)
    d = g.op("Sub", [x, u])
    v = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=[1, 2, 3], keepdims=1)
    y = g.op("Div", [d, g.op("Sqrt", [g.op("Add", [v, g.f32(eps)])])])
    w = g.rand(prefix + ".weight", (channels, 1, 1), 0.1, 1.0)
    b = g.rand(prefix + ".bias", (channels, 1, 1), 0.1)
    return g.op("Add", [g.op("Mul", [y, w]), b])


def decoder_model(c, side, seed, iou_bias, blobs=False):
    g = Graph(np.random.default_rng(seed))
    d, e, heads, down = c["dim"], side // 16, c["heads"], c["downsample"]
    nt = c["tokens"]
    esam = c.get("family") == "efficient_sam"
    gauss = g.rand("prompt_encoder.pe_layer.positional_encoding_gaussian_matrix", (2, d // 2), 1.0)
    # Prompt encoder: the point (+0.5, label from the input) and SAM's padding point;
    # EfficientSAM's pads to its six slots and has no dense (no-mask) embedding.
    if esam:
        sparse = efficient_sam_points(g, gauss, side, d, c["points"])
    else:
        sparse, no_mask = sam_points(g, gauss, side, d)
    # The dense position encoding of the e×e grid (cell centres).
    yy, xx = np.mgrid[0:e, 0:e].astype(np.float32)
    grid = np.stack([(xx + 0.5) / e, (yy + 0.5) / e], axis=-1)
    image_pe = g.op("Transpose", [fourier(g, g.f32(grid), gauss)], perm=[2, 0, 1])  # [d, e, e]
    # Mask decoder: tokens, per-prompt copies of the image, the two-way transformer.
    iou_tok = g.rand("mask_decoder.iou_token.weight", (1, d), 1.0)
    mask_tok = g.rand("mask_decoder.mask_tokens.weight", (nt, d), 1.0)
    batch = g.op("Slice", [g.op("Shape", ["point_coords"]), g.i64([0]), g.i64([1])])
    out_tok = g.op("Expand", [g.op("Unsqueeze", [g.op("Concat", [iou_tok, mask_tok], axis=0), g.i64([0])]),
                              g.op("Concat", [batch, g.i64([1, 1])], axis=0)])
    tokens = g.op("Concat", [out_tok, sparse], axis=1)
    src_shape = g.op("Concat", [batch, g.i64([1, 1, 1])], axis=0)
    src = g.op("Tile", ["image_embeddings", src_shape])
    if not esam:
        src = g.op("Add", [src, g.op("Reshape", [no_mask, g.i64([1, d, 1, 1])])])
    pos = g.op("Tile", [g.op("Unsqueeze", [image_pe, g.i64([0])]), src_shape])
    keys = g.op("Transpose", [g.op("Reshape", [src, g.i64([0, d, -1])])], perm=[0, 2, 1])
    key_pe = g.op("Transpose", [g.op("Reshape", [pos, g.i64([0, d, -1])])], perm=[0, 2, 1])
    queries, query_pe = tokens, tokens
    t = "mask_decoder.transformer"
    for i in range(c["depth"]):
        p = f"{t}.layers.{i}"
        if esam:  # the positions join the queries themselves; the first layer has none
            if i > 0:
                queries = g.op("Add", [queries, query_pe])
            queries = g.op("Add", [queries, attention(g, queries, queries, queries, p + ".self_attn", d, heads, 1)])
        elif i == 0:
            queries = attention(g, queries, queries, queries, p + ".self_attn", d, heads, 1)
        else:
            q = g.op("Add", [queries, query_pe])
            queries = g.op("Add", [queries, attention(g, q, q, queries, p + ".self_attn", d, heads, 1)])
        queries = g.layer_norm(queries, p + ".norm1", d, 1e-5)
        q, k = g.op("Add", [queries, query_pe]), g.op("Add", [keys, key_pe])
        queries = g.op("Add", [queries, attention(g, q, k, keys, p + ".cross_attn_token_to_image", d, heads, down)])
        queries = g.layer_norm(queries, p + ".norm2", d, 1e-5)
        m = g.linear(queries, p + ".mlp.lin1", d, c["mlp"])
        m = g.linear(g.gelu(m) if esam else g.op("Relu", [m]), p + ".mlp.lin2", c["mlp"], d)
        queries = g.layer_norm(g.op("Add", [queries, m]), p + ".norm3", d, 1e-5)
        q, k = g.op("Add", [queries, query_pe]), g.op("Add", [keys, key_pe])
        keys = g.op("Add", [keys, attention(g, k, q, queries, p + ".cross_attn_image_to_token", d, heads, down)])
        keys = g.layer_norm(keys, p + ".norm4", d, 1e-5)
    q, k = g.op("Add", [queries, query_pe]), g.op("Add", [keys, key_pe])
    queries = g.op("Add", [queries, attention(g, q, k, keys, t + ".final_attn_token_to_image", d, heads, down)])
    hs = g.layer_norm(queries, t + ".norm_final_attn", d, 1e-5)
    # Upscaling, hypernetworks, masks and IoU.
    up = g.op("Reshape", [g.op("Transpose", [keys], perm=[0, 2, 1]), g.i64([0, d, e, e])])
    for j, (a, b) in enumerate(((d, d // 4), (d // 4, d // 8))):
        p = f"mask_decoder.output_upscaling.{3 * j}"
        w = g.rand(p + ".weight", (a, b, 2, 2), a ** -0.5)
        up = g.op("ConvTranspose", [up, w, g.rand(p + ".bias", (b,), 0.02)], kernel_shape=[2, 2], strides=[2, 2])
        if j == 0 and esam:
            up = group_norm_1(g, up, "mask_decoder.output_upscaling.1", b)
        elif j == 0:
            up = g.layer_norm_2d(up, "mask_decoder.output_upscaling.1", b)
        up = g.gelu(up)
    hyper = []
    for i in range(nt):
        tok = g.op("Gather", [hs, g.i64(1 + i)], axis=1)
        h = mlp(g, tok, f"mask_decoder.output_hypernetworks_mlps.{i}", [d, d, d, d // 8], gelu=esam)
        hyper.append(g.op("Unsqueeze", [h, g.i64([1])]))
    hyper = g.op("Concat", hyper, axis=1)  # [B, 4, d/8]
    masks = g.op("MatMul", [hyper, g.op("Reshape", [up, g.i64([0, d // 8, -1])])])
    masks = g.op("Reshape", [masks, g.i64([0, nt, 4 * e, 4 * e])])
    iou_in = g.op("Gather", [hs, g.i64(0)], axis=1)
    iou = mlp(g, iou_in, "mask_decoder.iou_prediction_head", [d, c["iou_hidden"], c["iou_hidden"], nt], gelu=esam)
    iou = g.op("Add", [iou, g.f32(iou_bias)])
    masks = g.op("Slice", [masks, g.i64([1]), g.i64([nt]), g.i64([1])])
    iou = g.op("Slice", [iou, g.i64([1]), g.i64([nt]), g.i64([1])])
    if blobs:
        masks, iou = with_blobs(g, masks, iou, side, d)
    g.nodes.append(helper.make_node("Identity", [masks], ["low_res_masks"]))
    g.nodes.append(helper.make_node("Identity", [iou], ["iou_predictions"]))
    low = 4 * e
    meta = dict(c, side=side, iou_bias=iou_bias, blobs=blobs)
    return g.model(
        [helper.make_tensor_value_info("image_embeddings", TensorProto.FLOAT, [1, d, e, e]),
         helper.make_tensor_value_info("point_coords", TensorProto.FLOAT, ["B", 1, 2]),
         helper.make_tensor_value_info("point_labels", TensorProto.FLOAT, ["B", 1])],
        [helper.make_tensor_value_info("low_res_masks", TensorProto.FLOAT, ["B", nt - 1, low, low]),
         helper.make_tensor_value_info("iou_predictions", TensorProto.FLOAT, ["B", nt - 1])],
        "sam_mask_decoder", meta)


def with_blobs(g, masks, iou, side, channels):
    """Benchmarks only: SAM's decoder still runs in full, but the outputs are
    scripts/sam_onnx.py's blobs plus 0 × SAM's outputs, so the generator, clean-up, NMS
    and CLIP see realistic mask counts (random weights give noise masks that SAM's
    filters drop) while the decoder costs what SAM's does."""
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sam_onnx
    blob = onnx.compose.add_prefix(sam_onnx.decoder(side, channels), "blob/", rename_inputs=False)
    g.nodes.extend(blob.graph.node)
    g.inits.extend(blob.graph.initializer)
    zero = g.f32(0.0)
    masks = g.op("Add", ["blob/low_res_masks", g.op("Mul", [masks, zero])])
    iou = g.op("Add", ["blob/iou_predictions", g.op("Mul", [iou, zero])])
    return masks, iou


def make(out, encoder, decoder, seed, iou_bias, blobs=False):
    c = ENCODERS[encoder]
    esam = c.get("family") == "efficient_sam"
    default = ("tiny" if c["side"] < 1024 else "sam") if not esam else ("tiny_esam" if c["side"] < 1024 else "esam")
    dc = DECODERS[decoder or default]
    if dc["dim"] != c["out_chans"]:
        raise SystemExit(f"decoder width {dc['dim']} != encoder output {c['out_chans']}")
    os.makedirs(out, exist_ok=True)
    big = c["side"] >= 1024
    enc_path = os.path.join(out, "encoder.onnx")
    enc = encoder_model(dict(c, name=encoder), seed, enc_path + ".data" if big else None)
    onnx.save(enc, enc_path)
    dec = decoder_model(dc, c["side"], seed + 1, iou_bias, blobs)
    dec_path = os.path.join(out, "decoder.onnx")
    onnx.save(dec, dec_path)
    for p in (enc_path, dec_path):
        onnx.checker.check_model(p)
    if esam:  # EfficientSAM stretches its input (docs/formats.md)
        with open(os.path.join(out, "sam.json"), "w") as f:
            json.dump({"resize": "stretch"}, f)
    print(f"wrote {enc_path} ({encoder}) and {dec_path} (S = {c['side']})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--encoder", required=True, choices=sorted(ENCODERS))
    m.add_argument("--decoder", choices=sorted(DECODERS))
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--iou-bias", type=float, default=0.0)
    m.add_argument("--blobs", action="store_true",
                   help="benchmarks: output sam_onnx.py's blobs (+ 0 × SAM's outputs) for realistic mask counts")
    a = ap.parse_args()
    make(a.out, a.encoder, a.decoder, a.seed, a.iou_bias, a.blobs)


if __name__ == "__main__":
    main()
