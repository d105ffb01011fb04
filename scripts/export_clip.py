"""Export an open_clip model to the engine's CLIP model folder (docs/formats.md):

    python scripts/export_clip.py --model ViT-B-16 --pretrained laion2b_s34b_b88k --out clip-vit-b-16

writes OUT/text.onnx (input `input_ids`: int64 [B, 77] -> first output float32 [B, D]),
OUT/image.onnx (input `pixel_values`: float32 [B, 3, 224, 224] -> [B, D]) and
OUT/bpe_simple_vocab_16e6.txt.gz. The outputs are open_clip's `encode_text` /
`encode_image`, not normalised (the engine normalises). Run it where torch, open_clip
and the weights are (`pip install torch open_clip_torch onnx`; open_clip downloads the
named pretrained weights, or give `--checkpoint FILE`). With onnxruntime installed, the
exported files are run once and compared with torch.

The engine's tokenizer is open_clip's SimpleTokenizer (context 77) and its image
preprocessing is the 224 px, bicubic, OpenAI mean/std transform, so models that need
another tokenizer, input size or normalisation are refused (--force exports anyway).
"""
import argparse
import os
import shutil
import sys

import numpy as np
import torch

import open_clip
from open_clip import tokenizer as oc_tokenizer

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


class TextEncoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model.encode_text(input_ids)


class ImageEncoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model.encode_image(pixel_values)


def export(module, example, path, input_name, opset):
    kwargs = dict(
        input_names=[input_name],
        output_names=["embedding"],
        dynamic_axes={input_name: {0: "B"}, "embedding": {0: "B"}},
        opset_version=opset,
        do_constant_folding=True,
    )
    try:
        torch.onnx.export(module, (example,), path, dynamo=False, **kwargs)
    except TypeError:  # torch before 2.5 has no `dynamo` argument
        torch.onnx.export(module, (example,), path, **kwargs)


def check_compatible(name, model, preprocess, force):
    problems = []
    tok = open_clip.get_tokenizer(name)
    if not isinstance(tok, oc_tokenizer.SimpleTokenizer):
        problems.append(f"its tokenizer is {type(tok).__name__}, not CLIP's SimpleTokenizer")
    elif getattr(tok, "context_length", 77) != 77:
        problems.append(f"its context is {tok.context_length} tokens, not 77")
    size = getattr(model.visual, "image_size", 224)
    size = size if isinstance(size, int) else tuple(size)[0]
    if size != 224:
        problems.append(f"its images are {size} px, not 224")
    norm = [t for t in getattr(preprocess, "transforms", []) if type(t).__name__ == "Normalize"]
    if norm and (tuple(np.round(norm[0].mean, 6)) != tuple(np.round(OPENAI_MEAN, 6))
                 or tuple(np.round(norm[0].std, 6)) != tuple(np.round(OPENAI_STD, 6))):
        problems.append(f"it normalises with mean {norm[0].mean} / std {norm[0].std}, not OpenAI's")
    if problems and not force:
        sys.exit(f"{name}: the engine cannot feed this model: " + "; ".join(problems) + " (--force exports anyway)")
    for p in problems:
        print(f"warning: {p}")


def verify(out, model, tok):
    """Runs the exported files at batch sizes other than the export's examples."""
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed: the exported files were not run")
        return
    ids = tok(["a", "a photo of a mug on a wooden table", "red apple"]).long()
    pixels = torch.randn(3, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want_t = model.encode_text(ids).float().numpy()
        want_i = model.encode_image(pixels).float().numpy()
    got_t = ort.InferenceSession(os.path.join(out, "text.onnx")).run(None, {"input_ids": ids.numpy()})[0]
    got_i = ort.InferenceSession(os.path.join(out, "image.onnx")).run(None, {"pixel_values": pixels.numpy()})[0]

    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    dt = np.abs(unit(got_t) - unit(want_t)).max()
    di = np.abs(unit(got_i) - unit(want_i)).max()
    print(f"ONNX Runtime vs torch, max |difference| of unit embeddings: text {dt:.2e}, image {di:.2e}")
    if max(dt, di) > 1e-3:
        sys.exit("the exported models disagree with torch by more than 1e-3")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="ViT-B-16", help="open_clip model name")
    ap.add_argument("--pretrained", default="laion2b_s34b_b88k", help="open_clip pretrained tag")
    ap.add_argument("--checkpoint", help="a local checkpoint file instead of --pretrained")
    ap.add_argument("--out", required=True, help="model folder to write")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()

    pretrained = a.checkpoint or a.pretrained
    model, _, preprocess = open_clip.create_model_and_transforms(a.model, pretrained=pretrained, device="cpu")
    model = model.float().eval()
    check_compatible(a.model, model, preprocess, a.force)
    os.makedirs(a.out, exist_ok=True)

    tok = open_clip.get_tokenizer(a.model)
    ids = tok(["a photo of a red apple", "mug"]).long()
    pixels = torch.randn(2, 3, 224, 224)
    # nn.MultiheadAttention's inference fast path (`_native_multi_head_attention`) has no
    # ONNX export: the image tower needs the plain path.
    if hasattr(torch.backends, "mha"):
        torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        export(TextEncoder(model), ids, os.path.join(a.out, "text.onnx"), "input_ids", a.opset)
        export(ImageEncoder(model), pixels, os.path.join(a.out, "image.onnx"), "pixel_values", a.opset)
    shutil.copyfile(oc_tokenizer.default_bpe(), os.path.join(a.out, "bpe_simple_vocab_16e6.txt.gz"))
    verify(a.out, model, tok)
    print(f"wrote {a.out}: text.onnx, image.onnx, bpe_simple_vocab_16e6.txt.gz ({a.model}, {pretrained})")


if __name__ == "__main__":
    main()
