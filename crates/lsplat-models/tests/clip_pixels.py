"""Reference pixels for the preprocessing test: open_clip's evaluation transform for
ViT-B-16 (torchvision Resize(224, BICUBIC) of the shortest side on a PIL image,
CenterCrop(224), convert("RGB"), ToTensor, Normalize with OpenAI's mean/std),
computed with Pillow and NumPy in float32 as torch does.

    python clip_pixels.py OUT_DIR IMAGE...

Writes OUT_DIR/<i>.f32 (float32 [3, 224, 224]), OUT_DIR/<i>.rgb (the image as Pillow
decodes it, uint8 [H, W, 3]) and OUT_DIR/index.json (width, height per image).
"""
import json
import os
import sys

import numpy as np
from PIL import Image

MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)


def transform(img):
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = 224, int(224 * long / short)
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    if (new_w, new_h) != (w, h):
        img = img.resize((new_w, new_h), Image.BICUBIC)
    top = int(round((new_h - 224) / 2.0))
    left = int(round((new_w - 224) / 2.0))
    img = img.crop((left, top, left + 224, top + 224)).convert("RGB")
    x = np.asarray(img, dtype=np.uint8).astype(np.float32) / np.float32(255)
    x = (x - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1), dtype=np.float32)


def main():
    out = sys.argv[1]
    index = []
    for i, path in enumerate(sys.argv[2:]):
        img = Image.open(path)
        img = img.convert("RGB") if img.mode != "RGB" else img
        img.load()
        np.asarray(img, dtype=np.uint8).tofile(os.path.join(out, f"{i}.rgb"))
        transform(img).tofile(os.path.join(out, f"{i}.f32"))
        index.append({"path": path, "width": img.size[0], "height": img.size[1]})
    json.dump(index, open(os.path.join(out, "index.json"), "w"))


if __name__ == "__main__":
    main()
