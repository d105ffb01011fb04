"""Independent reference for lsplat-prep: SAM's automatic mask generator as
LangSplat's fork runs it, LangSplat's masks_update / mask_nms, crops and seg maps,
written with NumPy, Pillow and OpenCV (segment-anything itself needs torch, which the
CI machines do not install; langsplat_upstream.py runs the upstream code), following
segment_anything/automatic_mask_generator.py, utils/amg.py, utils/transforms.py,
predictor.py and LangSplat's preprocess.py.

The SAM networks are replaced: the decoder is `synthetic_decoder` (or an ONNX file run
by onnxruntime), whose every call is recorded so the engine can be driven by the same
outputs; the encoder's inputs are recorded and checked by the engine.

With `--resize stretch` the predictor is EfficientSAM's (efficient_sam/efficient_sam.py,
`EfficientSam.forward` with `scale_to_original_image_size=True`, run per crop by SAM's
generator): the crop as `ToTensor()` gives it (v / 255), stretched to S x S by
bilinear `F.interpolate`, normalised with mean (0.485, 0.456, 0.406) and std (0.229,
0.224, 0.225); points scaled by S / width and S / height; the low-resolution logits
upsampled straight to the crop's size by bicubic `F.interpolate`.

Usage: amg_reference.py --image PNG --out DIR [--points 6] [--layers 1]
       [--nms-max-dim 1024] [--min-area 100] [--sam SAM_DIR] [--resize stretch]
"""
import argparse
import math
import os
from itertools import product

import cv2
import numpy as np
from PIL import Image

MEAN = np.array([123.675, 116.28, 103.53], np.float32)
STD = np.array([58.395, 57.12, 57.375], np.float32)
STRETCH_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STRETCH_STD = np.array([0.229, 0.224, 0.225], np.float32)
LEVELS = ["default", "s", "m", "l"]


# ---------------------------------------------------------------- synthetic SAM decoder
def _hash(x, y, k):
    v = np.sin(x * 12.9898 + y * 78.233 + k * 37.719) * 43758.5453
    return v - np.floor(v)


def synthetic_decoder(points, low=256, side=1024):
    """Three elliptic blobs around each prompt (small, medium, large), logits in
    [-20, 20], some with a small hole or a small island, IoU predictions in
    [0.55, 1): sizes, slopes and scores depend on the point, so every filter acts."""
    p = points.astype(np.float64)
    b = len(p)
    yy, xx = np.mgrid[0:low, 0:low].astype(np.float64)
    masks = np.zeros((b, 3, low, low), np.float32)
    iou = np.zeros((b, 3), np.float32)
    for i in range(b):
        x, y = p[i]
        cx, cy = (x + 0.5) * low / side - 0.5, (y + 0.5) * low / side - 0.5
        for k in range(3):
            u = [_hash(x, y, k + 3 * j) for j in range(5)]
            r = [2.0 + 3.0 * u[0], 6.0 + 8.0 * u[0], 14.0 + 20.0 * u[0]][k]
            rx, ry = r * (0.6 + 0.8 * u[1]), r / (0.6 + 0.8 * u[1])
            slope = 6.0 + 20.0 * u[2]
            d = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2
            lg = slope * (1.0 - d)
            if u[3] > 0.6 and r > 5:  # a small hole inside
                lg = lg - 40.0 * np.exp(-((xx - cx - 0.4 * rx) ** 2 + (yy - cy) ** 2) / 0.5)
            if u[3] < 0.3:  # a small island outside
                lg = np.maximum(lg, 8.0 * (1.0 - ((xx - cx) ** 2 + (yy - cy - ry - 4.0) ** 2) / 1.2))
            masks[i, k] = np.clip(lg, -20.0, 20.0)
            iou[i, k] = 0.55 + 0.45 * u[4]
    return masks, iou


class OnnxDecoder:
    def __init__(self, path, embedding):
        import onnxruntime as ort
        self.s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.embedding = embedding

    def __call__(self, points):
        b = len(points)
        out = self.s.run(None, {
            "image_embeddings": self.embedding,
            "point_coords": points.reshape(b, 1, 2).astype(np.float32),
            "point_labels": np.ones((b, 1), np.float32),
        })
        return out[0].astype(np.float32), out[1].astype(np.float32)


# ---------------------------------------------------------------- SAM utilities
def build_point_grid(n):
    offset = 1 / (2 * n)
    side = np.linspace(offset, 1 - offset, n)
    px = np.tile(side[None, :], (n, 1))
    py = np.tile(side[:, None], (1, n))
    return np.stack([px, py], axis=-1).reshape(-1, 2)


def generate_crop_boxes(im_size, n_layers, overlap_ratio):
    crop_boxes, layer_idxs = [[0, 0, im_size[1], im_size[0]]], [0]
    im_h, im_w = im_size
    short_side = min(im_h, im_w)

    def crop_len(orig_len, n_crops, overlap):
        return int(math.ceil((overlap * (n_crops - 1) + orig_len) / n_crops))

    for i_layer in range(n_layers):
        n = 2 ** (i_layer + 1)
        overlap = int(overlap_ratio * short_side * (2 / n))
        cw, ch = crop_len(im_w, n, overlap), crop_len(im_h, n, overlap)
        x0s = [int((cw - overlap) * i) for i in range(n)]
        y0s = [int((ch - overlap) * i) for i in range(n)]
        for x0, y0 in product(x0s, y0s):
            crop_boxes.append([x0, y0, min(x0 + cw, im_w), min(y0 + ch, im_h)])
            layer_idxs.append(i_layer + 1)
    return crop_boxes, layer_idxs


def preprocess_shape(oldh, oldw, long_side):
    scale = long_side * 1.0 / max(oldh, oldw)
    return int(oldh * scale + 0.5), int(oldw * scale + 0.5)


def taps(n_in, n_out):
    """ATen's bilinear source indices and weights (align_corners=False)."""
    if n_in == n_out:
        i = np.arange(n_in)
        return i, i, np.ones(n_in, np.float32), np.zeros(n_in, np.float32)
    scale = np.float32(n_in) / np.float32(n_out)
    d = np.arange(n_out, dtype=np.float64)
    src = (np.float64(scale) * (d + 0.5) - 0.5).astype(np.float32)
    src = np.where(src < 0, np.float32(0), src)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    l1 = np.clip(src - i0.astype(np.float32), np.float32(0), np.float32(1)).astype(np.float32)
    i1 = i0 + (i0 < n_in - 1)
    return i0, i1, (np.float32(1) - l1).astype(np.float32), l1


def interpolate(x, out_h, out_w):
    """F.interpolate(x, (out_h, out_w), mode="bilinear", align_corners=False) on
    [N, h, w] float32: h0·(w0·a + w1·b) + h1·(w0·c + w1·d)."""
    y0, y1, h0, h1 = taps(x.shape[1], out_h)
    x0, x1, w0, w1 = taps(x.shape[2], out_w)
    r0, r1 = x[:, y0, :], x[:, y1, :]
    t0 = w0 * r0[:, :, x0] + w1 * r0[:, :, x1]
    t1 = w0 * r1[:, :, x0] + w1 * r1[:, :, x1]
    return h0[None, :, None] * t0 + h1[None, :, None] * t1


def cubic_taps(n_in, n_out):
    """ATen's bicubic indices and weights (align_corners=False, A = -0.75): source
    scale*(dst + 0.5) - 0.5 not clamped, base min(floor, n - 1), t clamped to [0, 1],
    indices base-1 .. base+2 clamped to the input; Keys' cubic in float32."""
    f = np.float32
    scale = f(n_in) / f(n_out)
    d = np.arange(n_out, dtype=np.float64)
    src = (np.float64(scale) * (d + 0.5) - 0.5).astype(np.float32)
    base = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    t = np.clip(src - base.astype(np.float32), f(0), f(1)).astype(np.float32)
    a = f(-0.75)

    def conv1(x):  # |x| <= 1
        return ((a + f(2)) * x - (a + f(3))) * x * x + f(1)

    def conv2(x):  # 1 < |x| < 2
        return ((a * x - f(5) * a) * x + f(8) * a) * x - f(4) * a

    u = f(1) - t
    weights = [conv2(t + f(1)), conv1(t), conv1(u), conv2(u + f(1))]
    index = [np.clip(base + j - 1, 0, n_in - 1) for j in range(4)]
    return index, [w.astype(np.float32) for w in weights]


def bicubic(x, out_h, out_w):
    """F.interpolate(x, (out_h, out_w), mode="bicubic", align_corners=False) on
    [N, h, w] float32, summed as ATen's CPU kernel does: over rows of (over columns)."""
    yi, yw = cubic_taps(x.shape[1], out_h)
    xi, xw = cubic_taps(x.shape[2], out_w)
    rows = x[:, :, xi[0]] * xw[0]
    for j in range(1, 4):
        rows = rows + x[:, :, xi[j]] * xw[j]
    out = rows[:, yi[0], :] * yw[0][None, :, None]
    for j in range(1, 4):
        out = out + rows[:, yi[j], :] * yw[j][None, :, None]
    return out


def stretch_input(crop, side):
    """EfficientSAM's preprocess on ToTensor()'s crop: bilinear to side x side, then
    (x - mean) / std, [3, side, side] float32."""
    x = crop.astype(np.float32).transpose(2, 0, 1) / np.float32(255)
    x = interpolate(x, side, side)
    return np.ascontiguousarray((x - STRETCH_MEAN[:, None, None]) / STRETCH_STD[:, None, None])


def postprocess_masks(low, side, input_size, crop_size):
    m = interpolate(low, side, side)
    m = m[:, : input_size[0], : input_size[1]]
    return interpolate(m, crop_size[0], crop_size[1])


def mask_to_box(m):
    rows, cols = np.where(m.any(1))[0], np.where(m.any(0))[0]
    if len(rows) == 0:
        return np.zeros(4, np.int64)
    return np.array([cols[0], rows[0], cols[-1], rows[-1]], np.int64)


def box_near_crop_edge(box, crop_box, orig_box, atol=20.0):
    b = box.astype(np.float32)
    near_crop = np.abs(b - np.array(crop_box, np.float32)) <= atol
    near_img = np.abs(b - np.array(orig_box, np.float32)) <= atol
    return bool(np.any(near_crop & ~near_img))


def nms(boxes, scores, thr):
    """torchvision.ops.nms (CPU kernel): stable descending order, float32 IoU."""
    b = np.asarray(boxes, np.float32).reshape(-1, 4)
    areas = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    order = np.argsort(-np.asarray(scores), kind="stable")
    sup = np.zeros(len(b), bool)
    keep = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for n, i in enumerate(order):
            if sup[i]:
                continue
            keep.append(int(i))
            for j in order[n + 1:]:
                if sup[j]:
                    continue
                w = max(np.float32(0), np.minimum(b[i, 2], b[j, 2]) - np.maximum(b[i, 0], b[j, 0]))
                h = max(np.float32(0), np.minimum(b[i, 3], b[j, 3]) - np.maximum(b[i, 1], b[j, 1]))
                inter = np.float32(w * h)
                ovr = inter / np.float32(areas[i] + areas[j] - inter)
                if float(ovr) > thr:
                    sup[j] = True
    return keep


def remove_small_regions(mask, area_thresh, mode):
    correct_holes = mode == "holes"
    working = (correct_holes ^ mask).astype(np.uint8)
    n_labels, regions, stats, _ = cv2.connectedComponentsWithStats(working, 8)
    sizes = stats[:, -1][1:]
    small = [i + 1 for i, s in enumerate(sizes) if s < area_thresh]
    if len(small) == 0:
        return mask, False
    fill = [0] + small
    if not correct_holes:
        fill = [i for i in range(n_labels) if i not in fill]
        if len(fill) == 0:
            fill = [int(np.argmax(sizes)) + 1]
    return np.isin(regions, fill), True


# ---------------------------------------------------------------- the generator
class Recorder:
    def __init__(self, out, decoder, encoder=None):
        self.out, self.decoder, self.encoder, self.n_dec, self.n_enc = out, decoder, encoder, 0, 0

    def encode(self, x):
        np.save(os.path.join(self.out, f"enc_{self.n_enc}.npy"), x)
        self.n_enc += 1
        if self.encoder is None:
            return x[None]
        return self.encoder.run(None, {"image": x[None]})[0]

    def decode(self, points):
        masks, iou = self.decoder(points)
        c = self.n_dec
        np.save(os.path.join(self.out, f"dec_{c}_points.npy"), points)
        np.save(os.path.join(self.out, f"dec_{c}_masks.npy"), masks)
        np.save(os.path.join(self.out, f"dec_{c}_iou.npy"), iou)
        self.n_dec += 1
        return masks, iou


def generate(image, rec, a):
    H, W = image.shape[:2]
    boxes_c, layers = generate_crop_boxes((H, W), a.layers, 512 / 1500)
    grids = [build_point_grid(int(a.points / (1 ** i))) for i in range(a.layers + 1)]
    lists = [[], [], [], []]
    for crop_box, layer in zip(boxes_c, layers):
        x0, y0, x1, y1 = crop_box
        crop = image[y0:y1, x0:x1, :]
        ch, cw = crop.shape[:2]
        if a.resize == "stretch":
            nh, nw = a.side, a.side
            x = stretch_input(crop, a.side)
        else:
            nh, nw = preprocess_shape(ch, cw, a.side)
            resized = np.array(Image.fromarray(crop).resize((nw, nh), Image.BILINEAR))
            x = np.zeros((3, a.side, a.side), np.float32)
            x[:, :nh, :nw] = ((resized.astype(np.float32) - MEAN) / STD).transpose(2, 0, 1)
        emb = rec.encode(x)
        if hasattr(rec.decoder, "embedding"):
            rec.decoder.embedding = emb
        pts = grids[layer] * np.array([cw, ch])[None, ::1]
        crop_lists = [[], [], [], []]
        for s in range(0, len(pts), a.batch):
            p = pts[s: s + a.batch]
            tp = p.copy().astype(float)
            tp[:, 0] = tp[:, 0] * (nw / cw)
            tp[:, 1] = tp[:, 1] * (nh / ch)
            low, iou = rec.decode(tp.astype(np.float32))
            # default = all three outputs (point-major), s/m/l = one output each.
            items = [(i, k) for i in range(len(p)) for k in range(3)]
            for lv, sel in enumerate([items] + [[(i, k) for i in range(len(p))] for k in range(3)]):
                cand = [(i, k) for (i, k) in sel if iou[i, k] > np.float32(a.pred_iou)]
                for g in range(0, len(cand), 16):
                    grp = cand[g: g + 16]
                    stack = np.stack([low[i, k] for i, k in grp])
                    if a.resize == "stretch":
                        lg = bicubic(stack, ch, cw)
                    else:
                        lg = postprocess_masks(stack, a.side, (nh, nw), (ch, cw))
                    for (i, k), m in zip(grp, lg):
                        hi = int((m > np.float32(1.0)).sum())
                        lo = int((m > np.float32(-1.0)).sum())
                        with np.errstate(invalid="ignore", divide="ignore"):
                            stab = np.float32(hi) / np.float32(lo)
                        if not stab >= np.float32(a.stability):
                            continue
                        mb = m > 0
                        box = mask_to_box(mb)
                        if box_near_crop_edge(box + np.array([x0, y0, x0, y0]), crop_box, [0, 0, W, H]):
                            continue
                        full = np.zeros((H, W), bool)
                        full[y0:y1, x0:x1] = mb
                        crop_lists[lv].append(dict(mask=full, box=box + np.array([x0, y0, x0, y0]),
                                                   iou=float(iou[i, k]), stab=float(stab),
                                                   crop_box=crop_box))
        for lv in range(4):
            cl = crop_lists[lv]
            keep = nms([r["box"] for r in cl], np.array([r["iou"] for r in cl], np.float32), a.box_nms)
            lists[lv].extend(cl[k] for k in keep)
    if len(boxes_c) > 1:
        for lv in range(4):
            cl = lists[lv]
            area = np.array([(c[2] - c[0]) * (c[3] - c[1]) for c in (r["crop_box"] for r in cl)], np.int64)
            scores = (np.float32(1) / area.astype(np.float32)).astype(np.float32)
            keep = nms([r["box"] for r in cl], scores, a.crop_nms)
            lists[lv] = [cl[k] for k in keep]
    return lists


def postprocess_small_regions(recs, min_area, thr):
    if not recs:
        return recs
    new, scores = [], []
    for r in recs:
        m, c1 = remove_small_regions(r["mask"], min_area, "holes")
        m, c2 = remove_small_regions(m, min_area, "islands")
        new.append(m)
        scores.append(float(not (c1 or c2)))
    boxes = [mask_to_box(m) for m in new]
    keep = nms(boxes, np.array(scores, np.float32), thr)
    return [dict(recs[i], mask=new[i], box=boxes[i]) for i in keep]


def area_downsample(m, h, w):
    """F.interpolate(mode="area") (adaptive average pooling: windows
    [floor(i·H/h), ceil((i+1)·H/h))), float32 mean, then > 0.5."""
    H, W = m.shape
    s = np.zeros((H + 1, W + 1), np.int64)
    s[1:, 1:] = m.astype(np.int64).cumsum(0).cumsum(1)
    i, j = np.arange(h), np.arange(w)
    ra, rb = (i * H) // h, -((-(i + 1) * H) // h)
    ca, cb = (j * W) // w, -((-(j + 1) * W) // w)
    cnt = s[rb][:, cb] - s[ra][:, cb] - s[rb][:, ca] + s[ra][:, ca]
    area = (rb - ra)[:, None] * (cb - ca)[None, :]
    return cnt.astype(np.float32) / area.astype(np.float32) > np.float32(0.5)


def mask_nms(masks, scores, iou_thr, score_thr, inner_thr, max_dim):
    """LangSplat's mask_nms (the loop of preprocess.py, float32), with the fVDB
    downsampling and clamped denominators, and the top-3 fallback fixed."""
    order = np.argsort(-scores, kind="stable")
    scores = scores[order]
    m = len(order)
    H, W = masks[0].shape
    work = [masks[i] for i in order]
    if max_dim and max(H, W) > max_dim:
        s = max_dim / max(H, W)
        h, w = max(1, int(round(H * s))), max(1, int(round(W * s)))
        work = [area_downsample(x, h, w) for x in work]
    area = np.array([x.sum() for x in work], np.float32)
    a = np.maximum(area, np.float32(1))
    iou = np.zeros((m, m), np.float32)
    inner = np.zeros((m, m), np.float32)
    for i in range(m):
        for j in range(i, m):
            inter = np.float32(np.logical_and(work[i], work[j]).sum())
            union = np.maximum(a[i] + a[j] - inter, np.float32(1))
            iou[i, j] = inter / union
            ri, rj = inter / a[i], inter / a[j]
            if ri < np.float32(0.5) and rj >= np.float32(0.85):
                inner[i, j] = np.float32(1) - rj * ri
            if ri >= np.float32(0.85) and rj < np.float32(0.5):
                inner[j, i] = np.float32(1) - rj * ri
    iou_max = np.triu(iou, 1).max(0)
    inner_u = np.triu(inner, 1).max(0)
    inner_l = np.tril(inner, 1).max(0)
    keep = iou_max <= np.float32(iou_thr)
    conf = scores > score_thr
    ku = inner_u <= np.float32(1 - inner_thr)
    kl = inner_l <= np.float32(1 - inner_thr)
    for k in (conf, ku, kl):
        if k.sum() == 0:
            k[: min(3, m)] = True
    keep = keep & conf & ku & kl
    return sorted(int(i) for i in order[keep])


def pad_img(img):
    h, w, _ = img.shape
    l = max(w, h)
    pad = np.zeros((l, l, 3), dtype=np.uint8)
    if h > w:
        pad[:, (h - w) // 2:(h - w) // 2 + w, :] = img
    else:
        pad[(w - h) // 2:(w - h) // 2 + h, :, :] = img
    return pad


def save_masks(path, masks, H, W):
    """Masks [N, H, W] as packed bits, rows of W bits padded to bytes."""
    a = np.array(masks, np.uint8).reshape(-1, H, W)
    np.save(path, np.packbits(a, axis=2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--points", type=int, default=6)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--side", type=int, default=1024)
    ap.add_argument("--pred-iou", type=float, default=0.7)
    ap.add_argument("--stability", type=float, default=0.85)
    ap.add_argument("--box-nms", type=float, default=0.7)
    ap.add_argument("--crop-nms", type=float, default=0.7)
    ap.add_argument("--min-area", type=int, default=100)
    ap.add_argument("--nms-max-dim", type=int, default=1024)
    ap.add_argument("--sam", default=None, help="a SAM model folder (encoder.onnx, decoder.onnx)")
    ap.add_argument("--resize", choices=["longest_side", "stretch"], default="longest_side",
                    help="SAM's input resize, or EfficientSAM's (stretch)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    bgr = cv2.imread(a.image)
    if bgr is None:
        raise SystemExit(f"cannot read {a.image}")
    image = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    if a.sam:
        import onnxruntime as ort
        enc = ort.InferenceSession(os.path.join(a.sam, "encoder.onnx"), providers=["CPUExecutionProvider"])
        rec = Recorder(a.out, OnnxDecoder(os.path.join(a.sam, "decoder.onnx"), None), enc)
    else:
        rec = Recorder(a.out, synthetic_decoder)
    lists = generate(image, rec, a)
    H, W = image.shape[:2]
    seg = np.full((4, H, W), -1, np.float32)
    offset = 0
    for lv, name in enumerate(LEVELS):
        recs = lists[lv]
        save_masks(os.path.join(a.out, f"amg_{name}.npy"), [r["mask"] for r in recs], H, W)
        np.save(os.path.join(a.out, f"amg_{name}_scores.npy"), np.array([[r["iou"], r["stab"]] for r in recs], np.float64).reshape(-1, 2))
        if a.min_area > 0:
            recs = postprocess_small_regions(recs, a.min_area, max(a.box_nms, a.crop_nms))
        save_masks(os.path.join(a.out, f"clean_{name}.npy"), [r["mask"] for r in recs], H, W)
        if recs:
            scores = np.array([r["stab"] for r in recs]) * np.array([r["iou"] for r in recs])
            keep = mask_nms([r["mask"] for r in recs], scores, 0.8, 0.7, 0.5, a.nms_max_dim)
            recs = [recs[i] for i in keep]
        save_masks(os.path.join(a.out, f"final_{name}.npy"), [r["mask"] for r in recs], H, W)
        crops = []
        for i, r in enumerate(recs):
            x, y, w, h = np.int32([r["box"][0], r["box"][1], r["box"][2] - r["box"][0], r["box"][3] - r["box"][1]])
            img = image.copy()
            img[r["mask"] == 0] = np.array([0, 0, 0], dtype=np.uint8)
            crops.append(cv2.resize(pad_img(img[y:y + h, x:x + w, ...]), (224, 224)))
            seg[lv][r["mask"]] = i + offset
        np.save(os.path.join(a.out, f"crops_{name}.npy"), np.array(crops, np.uint8).reshape(-1, 224, 224, 3))
        offset += len(recs)
    np.save(os.path.join(a.out, "seg.npy"), seg)
    print("counts", [len(x) for x in lists], "calls", rec.n_dec)


if __name__ == "__main__":
    main()
