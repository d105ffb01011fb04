"""A float64 NumPy reference of SAM's networks (segment-anything's ImageEncoderViT,
PromptEncoder and MaskDecoder; MobileSAM's TinyViT; EfficientSAM's ViT, prompt encoder
and mask decoder), written from their torch modules,
that reads the weights and configuration of scripts/sam_full_onnx.py's graphs back
from the ONNX files and computes what the graphs should output.

    python scripts/sam_numpy.py SAM_DIR --image IMAGE.npy --points POINTS.npy --out OUT_DIR

IMAGE.npy: float32 [1, 3, S, S] (the encoder input); POINTS.npy: float32 [B, 1, 2]
(the decoder's point prompts, label 1). Writes OUT_DIR/image_embeddings.npy,
low_res_masks.npy and iou_predictions.npy (float32 of the float64 results); the decoder
runs on the reference's own embeddings. Meant for the tiny configurations: NumPy
float64 at SAM ViT-H's size takes hours.
"""
import argparse
import json
import math
import os

import numpy as np
import onnx
from onnx import numpy_helper

_erf = np.vectorize(math.erf)


def load(path):
    m = onnx.load(path)
    params = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    meta = {p.key: p.value for p in m.metadata_props}
    return params, json.loads(meta["lsplat.sam"])


def linear(P, x, prefix, bias=True):
    y = x @ P[prefix + ".weight"]
    return y + P[prefix + ".bias"] if bias else y


def layer_norm(P, x, prefix, eps):
    u = x.mean(-1, keepdims=True)
    v = ((x - u) ** 2).mean(-1, keepdims=True)
    return (x - u) / np.sqrt(v + eps) * P[prefix + ".weight"] + P[prefix + ".bias"]


def layer_norm_2d(P, x, prefix, eps=1e-6):
    u = x.mean(1, keepdims=True)
    s = ((x - u) ** 2).mean(1, keepdims=True)
    x = (x - u) / np.sqrt(s + eps)
    return P[prefix + ".weight"].reshape(-1, 1, 1) * x + P[prefix + ".bias"].reshape(-1, 1, 1)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def conv2d(x, w, b=None, stride=1, pad=0, groups=1):
    """torch.nn.functional.conv2d, as a sum over kernel taps."""
    bsz, cin, h, wd = x.shape
    cout, cin_g, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    wg = w.reshape(groups, cout // groups, cin_g, kh, kw)
    out = np.zeros((bsz, groups, cout // groups, ho, wo))
    for dy in range(kh):
        for dx in range(kw):
            patch = x[:, :, dy:dy + stride * (ho - 1) + 1:stride, dx:dx + stride * (wo - 1) + 1:stride]
            patch = patch.reshape(bsz, groups, cin_g, ho, wo)
            out += np.einsum("bgchw,goc->bgohw", patch, wg[:, :, :, dy, dx])
    out = out.reshape(bsz, cout, ho, wo)
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def conv_transpose_2x2(x, w, b):
    """ConvTranspose2d with kernel 2, stride 2: each input pixel paints a 2×2 block."""
    bsz, _, h, wd = x.shape
    out = np.einsum("bchw,coyx->bohywx", x, w).reshape(bsz, w.shape[1], 2 * h, 2 * wd)
    return out + b.reshape(1, -1, 1, 1)


# --- ImageEncoderViT -------------------------------------------------------------------

def window_partition(x, ws):
    b, h, w, c = x.shape
    ph, pw = (ws - h % ws) % ws, (ws - w % ws) % ws
    x = np.pad(x, ((0, 0), (0, ph), (0, pw), (0, 0)))
    hp, wp = h + ph, w + pw
    x = x.reshape(b, hp // ws, ws, wp // ws, ws, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, ws, ws, c), (hp, wp)


def window_unpartition(x, ws, pad_hw, hw):
    (hp, wp), (h, w) = pad_hw, hw
    b = x.shape[0] // (hp * wp // ws // ws)
    x = x.reshape(b, hp // ws, wp // ws, ws, ws, -1).transpose(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, -1)
    return x[:, :h, :w, :]


def get_rel_pos(q_size, k_size, rel_pos):
    assert rel_pos.shape[0] == 2 * max(q_size, k_size) - 1, "no interpolation in SAM's configs"
    q = np.arange(q_size)[:, None] * max(k_size / q_size, 1.0)
    k = np.arange(k_size)[None, :] * max(q_size / k_size, 1.0)
    return rel_pos[((q - k) + (k_size - 1) * max(q_size / k_size, 1.0)).astype(np.int64)]


def vit_attention(P, x, prefix, heads, rel_pos=True):
    b, h, w, dim = x.shape
    hd = dim // heads
    qkv = linear(P, x, prefix + ".qkv").reshape(b, h * w, 3, heads, -1).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv.reshape(3, b * heads, h * w, -1)
    attn = (q * hd ** -0.5) @ k.transpose(0, 2, 1)
    if not rel_pos:  # EfficientSAM
        x = (softmax(attn) @ v).reshape(b, heads, h, w, -1).transpose(0, 2, 3, 1, 4).reshape(b, h, w, -1)
        return linear(P, x, prefix + ".proj")
    rh = get_rel_pos(h, h, P[prefix + ".rel_pos_h"])
    rw = get_rel_pos(w, w, P[prefix + ".rel_pos_w"])
    rq = q.reshape(b * heads, h, w, hd)
    rel_h = np.einsum("bhwc,hkc->bhwk", rq, rh)
    rel_w = np.einsum("bhwc,wkc->bhwk", rq, rw)
    attn = (attn.reshape(b * heads, h, w, h, w) + rel_h[:, :, :, :, None]
            + rel_w[:, :, :, None, :]).reshape(b * heads, h * w, h * w)
    x = (softmax(attn) @ v).reshape(b, heads, h, w, -1).transpose(0, 2, 3, 1, 4).reshape(b, h, w, -1)
    return linear(P, x, prefix + ".proj")


def neck(P, x):
    x = layer_norm_2d(P, conv2d(x, P["neck.0.weight"]), "neck.1")
    return layer_norm_2d(P, conv2d(x, P["neck.2.weight"], pad=1), "neck.3")


def vit_encoder(P, c, img):
    x = conv2d(img, P["patch_embed.proj.weight"], P["patch_embed.proj.bias"], stride=c["patch"])
    x = x.transpose(0, 2, 3, 1) + P["pos_embed"]
    for i in range(c["depth"]):
        p = f"blocks.{i}"
        ws = 0 if i in c["global_attn"] else c["window"]
        shortcut = x
        x = layer_norm(P, x, p + ".norm1", 1e-6)
        if ws > 0:
            hw = x.shape[1:3]
            x, pad_hw = window_partition(x, ws)
        x = vit_attention(P, x, p + ".attn", c["heads"], c.get("rel_pos", True))
        if ws > 0:
            x = window_unpartition(x, ws, pad_hw, hw)
        x = shortcut + x
        h = layer_norm(P, x, p + ".norm2", 1e-6)
        x = x + linear(P, gelu(linear(P, h, p + ".mlp.lin1")), p + ".mlp.lin2")
    return neck(P, x.transpose(0, 3, 1, 2))


# --- TinyViT ---------------------------------------------------------------------------

def conv_bn(P, x, prefix, stride=1, pad=0, groups=1):
    y = conv2d(x, P[prefix + ".c.weight"], stride=stride, pad=pad, groups=groups)
    s = lambda n: P[f"{prefix}.bn.{n}"].reshape(1, -1, 1, 1)  # noqa: E731
    return (y - s("running_mean")) / np.sqrt(s("running_var") + 1e-5) * s("weight") + s("bias")


def tiny_attention(P, x, prefix, heads, ws):
    b, n, dim = x.shape
    kd = dim // heads
    points = [(i, j) for i in range(ws) for j in range(ws)]
    offsets, idxs = {}, []
    for p1 in points:
        for p2 in points:
            o = (abs(p1[0] - p2[0]), abs(p1[1] - p2[1]))
            if o not in offsets:
                offsets[o] = len(offsets)
            idxs.append(offsets[o])
    ab = P[prefix + ".attention_biases"][:, np.array(idxs).reshape(n, n)]
    x = layer_norm(P, x, prefix + ".norm", 1e-5)
    qkv = linear(P, x, prefix + ".qkv").reshape(b, n, heads, -1)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in np.split(qkv, [kd, 2 * kd], axis=3))
    attn = softmax(q @ k.transpose(0, 1, 3, 2) * kd ** -0.5 + ab)
    return linear(P, (attn @ v).transpose(0, 2, 1, 3).reshape(b, n, dim), prefix + ".proj")


def tiny_block(P, x, prefix, res, heads, ws):
    h, w = res
    b, n, c = x.shape
    res_x = x
    if h == ws and w == ws:
        x = tiny_attention(P, x, prefix + ".attn", heads, ws)
    else:
        x = x.reshape(b, h, w, c)
        pb, pr = (ws - h % ws) % ws, (ws - w % ws) % ws
        x = np.pad(x, ((0, 0), (0, pb), (0, pr), (0, 0)))
        ph, pw = h + pb, w + pr
        nh, nw = ph // ws, pw // ws
        x = x.reshape(b, nh, ws, nw, ws, c).transpose(0, 1, 3, 2, 4, 5).reshape(b * nh * nw, ws * ws, c)
        x = tiny_attention(P, x, prefix + ".attn", heads, ws)
        x = x.reshape(b, nh, nw, ws, ws, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, ph, pw, c)
        x = x[:, :h, :w].reshape(b, n, c)
    x = res_x + x
    x = x.transpose(0, 2, 1).reshape(b, c, h, w)
    x = conv_bn(P, x, prefix + ".local_conv", pad=1, groups=c)
    x = x.reshape(b, c, n).transpose(0, 2, 1)
    m = layer_norm(P, x, prefix + ".mlp.norm", 1e-5)
    return x + linear(P, gelu(linear(P, m, prefix + ".mlp.fc1")), prefix + ".mlp.fc2")


def patch_merging(P, x, prefix, res, stride):
    if x.ndim == 3:
        x = x.reshape(x.shape[0], res, res, -1).transpose(0, 3, 1, 2)
    out = P[prefix + ".conv1.c.weight"].shape[0]
    x = gelu(conv_bn(P, x, prefix + ".conv1"))
    x = gelu(conv_bn(P, x, prefix + ".conv2", stride=stride, pad=1, groups=out))
    x = conv_bn(P, x, prefix + ".conv3")
    return x.reshape(x.shape[0], x.shape[1], -1).transpose(0, 2, 1)


def tinyvit_encoder(P, c, img):
    x = gelu(conv_bn(P, img, "patch_embed.seq.0", stride=2, pad=1))
    x = conv_bn(P, x, "patch_embed.seq.2", stride=2, pad=1)
    res0 = c["side"] // 4
    for b in range(c["depths"][0]):
        p = f"layers.0.blocks.{b}"
        hid = P[p + ".conv1.c.weight"].shape[0]
        shortcut = x
        t = gelu(conv_bn(P, x, p + ".conv1"))
        t = gelu(conv_bn(P, t, p + ".conv2", pad=1, groups=hid))
        x = gelu(conv_bn(P, t, p + ".conv3") + shortcut)
    x = patch_merging(P, x, "layers.0.downsample", res0, 2)
    for i in range(1, 4):
        res = res0 // 2 ** (i - 1 if i == 3 else i)
        for b in range(c["depths"][i]):
            x = tiny_block(P, x, f"layers.{i}.blocks.{b}", (res, res), c["heads"][i], c["windows"][i])
        if i < 3:
            x = patch_merging(P, x, f"layers.{i}.downsample", res, 1 if i == 2 else 2)
    g = c["side"] // 16
    x = x.reshape(x.shape[0], g, g, -1).transpose(0, 3, 1, 2)
    return neck(P, x)


# --- PromptEncoder and MaskDecoder -------------------------------------------------------

def pe_encoding(P, coords):
    g = P["prompt_encoder.pe_layer.positional_encoding_gaussian_matrix"]
    c = 2 * np.pi * ((2 * coords - 1) @ g)
    return np.concatenate([np.sin(c), np.cos(c)], axis=-1)


def embed_points(P, points, labels, side):
    points = points + 0.5
    points = np.concatenate([points, np.zeros((points.shape[0], 1, 2))], axis=1)
    labels = np.concatenate([labels, -np.ones((labels.shape[0], 1))], axis=1)
    emb = pe_encoding(P, points / np.array([side, side]))
    emb[labels == -1] = 0.0
    emb[labels == -1] += P["prompt_encoder.not_a_point_embed.weight"][0]
    emb[labels == 0] += P["prompt_encoder.point_embeddings.0.weight"][0]
    emb[labels == 1] += P["prompt_encoder.point_embeddings.1.weight"][0]
    return emb


def embed_points_efficient_sam(P, points, labels, side, slots):
    """EfficientSAM's _embed_points: padding to `slots` points at −1 with label −1, +0.5,
    the position encoding kept for every slot, plus each label's embedding."""
    b = points.shape[0]
    points = np.concatenate([points, -np.ones((b, slots - 1, 2))], axis=1) + 0.5
    labels = np.concatenate([labels, -np.ones((b, slots - 1))], axis=1)
    emb = pe_encoding(P, points / np.array([side, side]))
    for v, name in ((-1, "invalid_points"), (1, "point_embeddings"),
                    (2, "bbox_top_left_embeddings"), (3, "bbox_bottom_right_embeddings")):
        emb = emb + (labels == v)[:, :, None] * P[f"prompt_encoder.{name}.weight"][0]
    return emb


def group_norm_1(P, x, prefix, eps=1e-5):
    u = x.mean(axis=(1, 2, 3), keepdims=True)
    v = ((x - u) ** 2).mean(axis=(1, 2, 3), keepdims=True)
    y = (x - u) / np.sqrt(v + eps)
    return y * P[prefix + ".weight"].reshape(-1, 1, 1) + P[prefix + ".bias"].reshape(-1, 1, 1)


def attention(P, q, k, v, prefix, heads):
    def sep(t):
        b, n, c = t.shape
        return t.reshape(b, n, heads, c // heads).transpose(0, 2, 1, 3)

    q = sep(linear(P, q, prefix + ".q_proj"))
    k = sep(linear(P, k, prefix + ".k_proj"))
    v = sep(linear(P, v, prefix + ".v_proj"))
    a = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]))
    o = (a @ v).transpose(0, 2, 1, 3)
    return linear(P, o.reshape(o.shape[0], o.shape[1], -1), prefix + ".out_proj")


def mlp(P, x, prefix, layers, act=None):
    act = act or (lambda t: np.maximum(t, 0))
    for i in range(layers):
        x = linear(P, x, f"{prefix}.layers.{i}")
        if i < layers - 1:
            x = act(x)
    return x


def decoder(P, c, emb, points):
    side, heads = c["side"], c["heads"]
    b = points.shape[0]
    e = side // 16
    esam = c.get("family") == "efficient_sam"
    act = gelu if esam else (lambda t: np.maximum(t, 0))
    if esam:  # no dense embedding
        sparse = embed_points_efficient_sam(P, points, np.ones((b, 1)), side, c["points"])
        dense = 0.0
    else:
        sparse = embed_points(P, points, np.ones((b, 1)), side)
        dense = np.broadcast_to(P["prompt_encoder.no_mask_embed.weight"].reshape(1, -1, 1, 1), (b, c["dim"], e, e))
    grid = np.ones((e, e))
    y, x = grid.cumsum(0) - 0.5, grid.cumsum(1) - 0.5
    image_pe = pe_encoding(P, np.stack([x / e, y / e], axis=-1)).transpose(2, 0, 1)[None]
    out_tokens = np.concatenate([P["mask_decoder.iou_token.weight"], P["mask_decoder.mask_tokens.weight"]])
    tokens = np.concatenate([np.broadcast_to(out_tokens, (b,) + out_tokens.shape), sparse], axis=1)
    src = np.repeat(emb, b, axis=0) + dense
    pos = np.repeat(image_pe, b, axis=0)
    keys = src.reshape(b, c["dim"], -1).transpose(0, 2, 1)
    key_pe = pos.reshape(b, c["dim"], -1).transpose(0, 2, 1)
    queries, qpe = tokens, tokens
    t = "mask_decoder.transformer"
    for i in range(c["depth"]):
        p = f"{t}.layers.{i}"
        if esam:  # EfficientSAM's TwoWayAttentionBlock: queries += pe (but the first), residual
            if i > 0:
                queries = queries + qpe
            queries = queries + attention(P, queries, queries, queries, p + ".self_attn", heads)
        elif i == 0:
            queries = attention(P, queries, queries, queries, p + ".self_attn", heads)
        else:
            q = queries + qpe
            queries = queries + attention(P, q, q, queries, p + ".self_attn", heads)
        queries = layer_norm(P, queries, p + ".norm1", 1e-5)
        queries = queries + attention(P, queries + qpe, keys + key_pe, keys, p + ".cross_attn_token_to_image", heads)
        queries = layer_norm(P, queries, p + ".norm2", 1e-5)
        m = linear(P, act(linear(P, queries, p + ".mlp.lin1")), p + ".mlp.lin2")
        queries = layer_norm(P, queries + m, p + ".norm3", 1e-5)
        keys = keys + attention(P, keys + key_pe, queries + qpe, queries, p + ".cross_attn_image_to_token", heads)
        keys = layer_norm(P, keys, p + ".norm4", 1e-5)
    queries = queries + attention(P, queries + qpe, keys + key_pe, keys, t + ".final_attn_token_to_image", heads)
    hs = layer_norm(P, queries, t + ".norm_final_attn", 1e-5)
    u = "mask_decoder.output_upscaling"
    up = keys.transpose(0, 2, 1).reshape(b, c["dim"], e, e)
    up = conv_transpose_2x2(up, P[u + ".0.weight"], P[u + ".0.bias"])
    up = gelu(group_norm_1(P, up, u + ".1") if esam else layer_norm_2d(P, up, u + ".1"))
    up = gelu(conv_transpose_2x2(up, P[u + ".3.weight"], P[u + ".3.bias"]))
    nt = c["tokens"]
    hyper = np.stack([mlp(P, hs[:, 1 + i], f"mask_decoder.output_hypernetworks_mlps.{i}", 3, act)
                      for i in range(nt)], axis=1)
    bb, ch, h, w = up.shape
    masks = (hyper @ up.reshape(bb, ch, h * w)).reshape(bb, -1, h, w)
    iou = mlp(P, hs[:, 0], "mask_decoder.iou_prediction_head", 3, act) + c["iou_bias"]
    return masks[:, 1:], iou[:, 1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sam")
    ap.add_argument("--image", required=True)
    ap.add_argument("--points", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    pe, ce = load(os.path.join(a.sam, "encoder.onnx"))
    pd, cd = load(os.path.join(a.sam, "decoder.onnx"))
    img = np.load(a.image).astype(np.float64)
    emb = (vit_encoder if ce["kind"] == "vit" else tinyvit_encoder)(pe, ce, img)
    masks, iou = decoder(pd, cd, emb, np.load(a.points).astype(np.float64))
    os.makedirs(a.out, exist_ok=True)
    for name, v in (("image_embeddings", emb), ("low_res_masks", masks), ("iou_predictions", iou)):
        np.save(os.path.join(a.out, name + ".npy"), v.astype(np.float32))


if __name__ == "__main__":
    main()
