"""LangSplat's own preprocess.py against `lsplat-engine preprocess`, on the same SAM and
CLIP ONNX folders.

amg_reference.py (run by the tests) is our NumPy reading of segment-anything and of
LangSplat's preprocess.py. This script runs the upstream code itself: LangSplat's
preprocess.py unchanged (its image loading and resolution rule, `masks_update`,
`mask_nms`, crops, seg maps, float16 features) and the automatic mask generator of
LangSplat's segment-anything fork (predictor, `postprocess_masks`, stability, box NMS,
crop layers, small-region removal). Only the networks are swapped for ONNX Runtime
sessions of the folders the engine reads: SAM's encoder behind `image_encoder`, its
decoder behind `prompt_encoder` + `mask_decoder` (so `SamPredictor.predict_torch` runs
as written), open_clip's `encode_image` / `encode_text` behind CLIP's folder. "cuda"
becomes the CPU. Then it runs the engine on the same images and compares the files.

Needs what LangSplat needs (torch, torchvision, open_clip_torch, opencv-python, tqdm)
plus onnxruntime, a LangSplat checkout and its segment-anything fork; it is not a CI
test (torch is several GB). docs/formats.md ("Checked against LangSplat's own code")
has the command and the last results.

At LangSplat's 32 points per side its mask NMS, a Python loop over all pairs of masks
on full-resolution tensors, meets thousands of masks per level with the synthetic
decoder (4 888 on a 504×378 fern image) and runs for hours on a CPU. Two ways out:
a synthetic SAM made with `sam_onnx.py --iou-base 0.4` lets fewer masks pass the
generator's pred_iou_thresh (2 256 in that level), so LangSplat's exact settings run
in minutes (on a 1440×1080 image take `--iou-base 0.35`: at 0.4 LangSplat's NMS ran
out of 23 GiB); or `--points-per-side` and `--crop-n-layers`, which change both sides'
generator settings, and nothing else.

Usage: langsplat_upstream.py --langsplat LANGSPLAT_DIR --sam-fork SEGMENT_ANYTHING_LANGSPLAT_DIR
           --engine lsplat-engine --sam SAM_DIR --clip CLIP_DIR --images DIR --out DIR
           [--resolution -1] [--points-per-side 32] [--crop-n-layers 1] [--torch-ties]
           [--set key=value ...]
"""
import argparse
import glob
import os
import runpy
import shutil
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import torch
from torch import nn


def session(path):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


class OrtEncoder(nn.Module):
    """SAM's image encoder: the padded, normalised [1, 3, S, S] image -> embeddings."""

    def __init__(self, path):
        super().__init__()
        self.sess = session(path)
        self.img_size = self.sess.get_inputs()[0].shape[-1]

    def forward(self, x):
        return torch.from_numpy(self.sess.run(None, {"image": x.float().numpy()})[0])


class OrtPrompts(nn.Module):
    """Stands in for SAM's prompt encoder: hands the points to OrtDecoder unchanged."""

    def forward(self, points, boxes, masks):
        assert boxes is None and masks is None, "the contract has point prompts only"
        return points, None

    def get_dense_pe(self):
        return None


class OrtDecoder(nn.Module):
    """SAM's mask decoder for single-point prompts in the encoder's frame."""

    def __init__(self, path):
        super().__init__()
        self.sess = session(path)

    def forward(self, image_embeddings, image_pe, sparse_prompt_embeddings, dense_prompt_embeddings,
                multimask_output):
        assert multimask_output
        coords, labels = sparse_prompt_embeddings
        low, iou = self.sess.run(None, {
            "image_embeddings": image_embeddings.float().numpy(),
            "point_coords": coords.float().numpy(),
            "point_labels": labels.float().numpy(),
        })
        return torch.from_numpy(low), torch.from_numpy(iou)


class OrtClip(nn.Module):
    """open_clip's model as LangSplat's OpenCLIPNetwork uses it."""

    def __init__(self, clip_dir):
        super().__init__()
        self.text = session(os.path.join(clip_dir, "text.onnx"))
        self.image = session(os.path.join(clip_dir, "image.onnx"))

    def encode_text(self, ids):
        name = self.text.get_inputs()[0].name
        return torch.from_numpy(self.text.run(None, {name: ids.long().numpy()})[0])

    def encode_image(self, pixels):
        name = self.image.get_inputs()[0].name
        # LangSplat feeds float16 (`precision="fp16"`); the float32 model gets those values.
        return torch.from_numpy(self.image.run(None, {name: pixels.float().numpy()})[0])


def cuda_is_cpu():
    """LangSplat moves tensors and models to "cuda": keep them on the CPU."""

    def swap(args, kwargs):
        args = tuple("cpu" if a == "cuda" else a for a in args)
        if kwargs.get("device") == "cuda":
            kwargs["device"] = "cpu"
        return args, kwargs

    tensor_to, module_to = torch.Tensor.to, nn.Module.to

    def t_to(self, *args, **kwargs):
        args, kwargs = swap(args, kwargs)
        return tensor_to(self, *args, **kwargs)

    def m_to(self, *args, **kwargs):
        args, kwargs = swap(args, kwargs)
        return module_to(self, *args, **kwargs)

    torch.Tensor.to, nn.Module.to = t_to, m_to


def stable_sorts():
    """PyTorch's CPU sort leaves equal keys as std::sort does (out of list order from a
    few dozen elements on), and torchvision's `batched_nms` sorts its result that way over 1 000 boxes (the
    clean-up's scores are 0 or 1, so most of them tie). The engine keeps equal keys in
    list order (docs/formats.md, "Ties"): make every sort stable, as the engine's."""
    tensor_sort, torch_sort = torch.Tensor.sort, torch.sort

    def named(args, kwargs):  # sort(dim, descending) -> sort(stable=True, dim=, descending=)
        kwargs.update(zip(("dim", "descending"), args), stable=True)
        return kwargs

    def t_sort(self, *args, **kwargs):
        return tensor_sort(self, **named(args, kwargs))

    def f_sort(x, *args, **kwargs):
        return torch_sort(x, **named(args, kwargs))

    torch.Tensor.sort, torch.sort = t_sort, f_sort


def run_langsplat(a, dataset):
    sys.path.insert(0, a.sam_fork)
    import open_clip
    import segment_anything
    from segment_anything.modeling import Sam

    def build(checkpoint=None):
        return Sam(OrtEncoder(os.path.join(a.sam, "encoder.onnx")), OrtPrompts(),
                   OrtDecoder(os.path.join(a.sam, "decoder.onnx")))

    segment_anything.sam_model_registry = {k: build for k in ("vit_h", "vit_l", "vit_b", "default")}
    generator = segment_anything.SamAutomaticMaskGenerator

    def fewer_prompts(*args, **kwargs):
        # LangSplat's settings but these two: its O(M²) mask NMS takes hours on a CPU
        # at 32 points per side (see the docstring).
        kwargs.update(points_per_side=a.points_per_side, crop_n_layers=a.crop_n_layers)
        return generator(*args, **kwargs)

    segment_anything.SamAutomaticMaskGenerator = fewer_prompts
    open_clip.create_model_and_transforms = lambda *_, **__: (OrtClip(a.clip), None, None)
    cuda_is_cpu()
    if not a.torch_ties:
        stable_sorts()
    sys.argv = ["preprocess.py", "--dataset_path", dataset, "--resolution", str(a.resolution)]
    runpy.run_path(os.path.join(a.langsplat, "preprocess.py"), run_name="__main__")


def compare(ours_dir, theirs_dir):
    names = sorted(os.path.basename(p)[:-6] for p in glob.glob(os.path.join(theirs_dir, "*_s.npy")))
    if not names:
        sys.exit(f"{theirs_dir}: LangSplat wrote nothing")
    worst = 0
    for n in names:
        s_t = np.load(os.path.join(theirs_dir, n + "_s.npy"))
        f_t = np.load(os.path.join(theirs_dir, n + "_f.npy"))
        s_o = np.load(os.path.join(ours_dir, n + "_s.npy"))
        f_o = np.load(os.path.join(ours_dir, n + "_f.npy"))
        if s_t.shape != s_o.shape or f_t.shape != f_o.shape:
            print(f"{n}: shapes differ: seg maps {s_t.shape} vs ours {s_o.shape}, "
                  f"features {f_t.shape} vs ours {f_o.shape}")
            worst = max(worst, 2)
            continue
        per_level = [int((s_t[k] != s_o[k]).sum()) for k in range(s_t.shape[0])]
        # Level k's ids follow level k-1's; an empty level (all -1) adds none.
        ends = np.maximum.accumulate([int(s_t[k].max()) + 1 for k in range(s_t.shape[0])])
        counts = np.diff(ends, prepend=0).tolist()
        df = float(np.abs(f_t - f_o).max()) if f_t.size else 0.0
        print(f"{n}: {s_t.shape[2]}x{s_t.shape[1]}, masks per level (default, s, m, l) {counts}; "
              f"seg-map pixels that differ per level {per_level}; features max |difference| {df:.2e}")
        worst = max(worst, 1 if any(per_level) or df > 5e-3 else 0)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--langsplat", required=True)
    ap.add_argument("--sam-fork", required=True)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--sam", required=True)
    ap.add_argument("--clip", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--resolution", type=int, default=-1)
    ap.add_argument("--points-per-side", type=int, default=32, help="LangSplat: 32")
    ap.add_argument("--crop-n-layers", type=int, default=1, help="LangSplat: 1")
    ap.add_argument("--torch-ties", action="store_true",
                    help="leave PyTorch's sorts as they are (equal keys in std::sort's order)")
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    # Checked first: with a wrong --sam-fork Python would quietly import an installed
    # segment-anything instead of LangSplat's fork.
    for path, what in ((os.path.join(a.langsplat, "preprocess.py"), "--langsplat"),
                       (os.path.join(a.sam_fork, "segment_anything", "__init__.py"), "--sam-fork")):
        if not os.path.isfile(path):
            sys.exit(f"{what}: {path} does not exist")

    dataset = os.path.join(a.out, "scene")
    os.makedirs(os.path.join(dataset, "language_features"), exist_ok=True)
    if not os.path.isdir(os.path.join(dataset, "images")):
        shutil.copytree(a.images, os.path.join(dataset, "images"))
    cmd = [a.engine, "preprocess", "--images", os.path.join(dataset, "images"), "--sam", a.sam,
           "--clip", a.clip, "--out", os.path.join(a.out, "engine"), f"--resolution={a.resolution}"]
    for s in [f"preprocess.points_per_side={a.points_per_side}",
              f"preprocess.crop_n_layers={a.crop_n_layers}"] + a.set:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True)
    pid = os.fork()
    if pid == 0:  # LangSplat's script patches torch and open_clip: keep that out of this process
        run_langsplat(a, dataset)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        sys.exit("LangSplat's preprocess.py failed")
    sys.exit(compare(os.path.join(a.out, "engine", "language_features"),
                     os.path.join(dataset, "language_features")))


if __name__ == "__main__":
    main()
