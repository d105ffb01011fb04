"""Export a SAM checkpoint to lsplat-engine's SAM model folder (docs/formats.md):
`encoder.onnx` (image [1, 3, 1024, 1024] -> image_embeddings) and `decoder.onnx`
(image_embeddings, point_coords [B, 1, 2], point_labels [B, 1] -> low_res_masks
[B, 3, 256, 256], iou_predictions [B, 3]).

Needs torch and the model's package: `segment-anything` (vit_h, vit_l, vit_b),
`mobile_sam` (vit_t) or EfficientSAM's `efficient_sam` (efficient_sam_vitt,
efficient_sam_vits; its folder also gets `sam.json` with `"resize": "stretch"`, since
EfficientSAM stretches the image to 1024 x 1024 where SAM pads it). With onnxruntime
installed, the exported files are run against torch and the script stops if they
disagree. It was run on random-weight checkpoints of ViT-H, ViT-B, vit_t and
efficient_sam_vitt (torch 2.15.0; docs/formats.md); the engine's tests use
scripts/sam_onnx.py's synthetic graphs.

Usage: python export_sam.py --checkpoint sam_vit_h_4b8939.pth --model-type vit_h --out sam_vit_h
       python export_sam.py --checkpoint mobile_sam.pt --model-type vit_t --out mobile_sam
       python export_sam.py --checkpoint weights/efficient_sam_vitt.pt --model-type efficient_sam_vitt --out esam_ti
"""
import argparse
import json
import os
import sys

import torch


class Encoder(torch.nn.Module):
    def __init__(self, sam):
        super().__init__()
        self.image_encoder = sam.image_encoder

    def forward(self, image):
        return self.image_encoder(image)


class Decoder(torch.nn.Module):
    """SAM's prompt encoder and mask decoder for a batch of single-point prompts,
    as SamPredictor.predict_torch(multimask_output=True, return_logits=True) runs
    them, without the upsampling (the engine does SAM's postprocess_masks)."""

    def __init__(self, sam):
        super().__init__()
        self.prompt_encoder = sam.prompt_encoder
        self.mask_decoder = sam.mask_decoder

    def forward(self, image_embeddings, point_coords, point_labels):
        sparse, dense = self.prompt_encoder(points=(point_coords, point_labels), boxes=None, masks=None)
        masks, iou = self.mask_decoder(
            image_embeddings=image_embeddings,
            image_pe=self.prompt_encoder.get_dense_pe(),
            sparse_prompt_embeddings=sparse,
            dense_prompt_embeddings=dense,
            multimask_output=True,
        )
        return masks, iou


class EfficientSamDecoder(torch.nn.Module):
    """EfficientSAM's prompt encoder and mask decoder for a batch of single-point
    prompts given in the encoder's 1024 x 1024 frame, as `EfficientSam.predict_masks`
    runs them with `multimask_output=True` and no upsampling (the engine upsamples
    bicubically to the crop's size, as `scale_to_original_image_size` does). Each
    prompt is its own batch entry, so every shape inside stays static but the batch."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.side = model.image_encoder.img_size

    def forward(self, image_embeddings, point_coords, point_labels):
        b = point_coords.shape[0]
        emb = image_embeddings.expand(b, -1, -1, -1)
        masks, iou = self.model.predict_masks(
            emb, point_coords[:, None], point_labels[:, None],
            multimask_output=True, input_h=self.side, input_w=self.side, output_h=-1, output_w=-1,
        )
        return masks[:, 0], iou[:, 0]


def load(a):
    """The model and its (encoder, decoder, settings) for the model type."""
    if a.model_type.startswith("efficient_sam_"):
        from efficient_sam.efficient_sam import build_efficient_sam
        dims = {"efficient_sam_vitt": (192, 3), "efficient_sam_vits": (384, 6)}[a.model_type]
        model = build_efficient_sam(dims[0], dims[1], checkpoint=a.checkpoint).eval()
        # Its ViT alone, as SAM's: the engine does its `preprocess` (the stretch to
        # 1024 x 1024 and the normalisation).
        return model, Encoder(model), EfficientSamDecoder(model), {"resize": "stretch"}
    if a.model_type == "vit_t":
        from mobile_sam import sam_model_registry
    else:
        from segment_anything import sam_model_registry
    sam = sam_model_registry[a.model_type](checkpoint=a.checkpoint).eval()
    return sam, Encoder(sam), Decoder(sam), None


def export(module, args, path, inputs, outputs, batched, opset):
    """torch.onnx.export with the TorchScript exporter (as SAM's own export script), the
    first dimension of the `batched` names dynamic."""
    kwargs = dict(
        input_names=inputs,
        output_names=outputs,
        dynamic_axes={n: {0: "B"} for n in batched},
        opset_version=opset,
        do_constant_folding=True,
    )
    try:
        torch.onnx.export(module, args, path, dynamo=False, **kwargs)
    except TypeError:  # torch before 2.5 has no `dynamo` argument
        torch.onnx.export(module, args, path, **kwargs)


def one_data_file(path):
    """A model over protobuf's 2 GB (SAM ViT-H's encoder) is exported with one file per
    weight next to it; gather them into `<name>.data` (ONNX Runtime reads either)."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    model = onnx.load(path, load_external_data=False)
    files = {
        e.value
        for t in model.graph.initializer if uses_external_data(t)
        for e in t.external_data if e.key == "location"
    }
    if len(files) <= 1:
        return
    model = onnx.load(path)
    data = os.path.basename(path) + ".data"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data, size_threshold=1024)
    folder = os.path.dirname(path)
    for f in files - {data}:
        os.remove(os.path.join(folder, f))
    print(f"gathered {len(files)} weight files into {data}")


def verify(out, a, side):
    """Runs the exported files with ONNX Runtime against torch: the encoder on a random
    image, the decoder at batch sizes other than the export's example. The torch side is
    the checkpoint loaded again: exporting can change a module in place (MobileSAM's
    TinyViT computes other embeddings after its export)."""
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed: the exported files were not run")
        return
    _, encoder, decoder, _ = load(a)
    g = torch.Generator().manual_seed(1)
    image = torch.randn(1, 3, side, side, generator=g)
    with torch.no_grad():
        want = encoder(image)
    enc = ort.InferenceSession(os.path.join(out, "encoder.onnx"), providers=["CPUExecutionProvider"])
    emb = enc.run(None, {"image": image.numpy()})[0]

    def rel(got, want):
        want = want.numpy()
        return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-12))

    worst = {"image_embeddings": rel(emb, want)}
    dec = ort.InferenceSession(os.path.join(out, "decoder.onnx"), providers=["CPUExecutionProvider"])
    for b in (1, 2, 5):
        pts = torch.rand(b, 1, 2, generator=g) * side
        lab = torch.ones(b, 1)
        with torch.no_grad():
            masks, iou = decoder(want, pts, lab)
        got = dec.run(None, {"image_embeddings": want.numpy(), "point_coords": pts.numpy(), "point_labels": lab.numpy()})
        if got[0].shape != tuple(masks.shape) or got[1].shape != tuple(iou.shape):
            sys.exit(f"decoder at batch {b}: ONNX Runtime gave {got[0].shape}, {got[1].shape}; torch {tuple(masks.shape)}, {tuple(iou.shape)}")
        worst["low_res_masks"] = max(worst.get("low_res_masks", 0.0), rel(got[0], masks))
        worst["iou_predictions"] = max(worst.get("iou_predictions", 0.0), rel(got[1], iou))
    print("ONNX Runtime vs torch, max |difference| / max |torch| (decoder at batch 1, 2 and 5): "
          + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))
    if max(worst.values()) > 1e-3:
        sys.exit("the exported models disagree with torch by more than 1e-3")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--model-type", required=True,
                    help="vit_h, vit_l, vit_b (segment-anything), vit_t (MobileSAM), "
                         "efficient_sam_vitt or efficient_sam_vits (EfficientSAM)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--opset", type=int, default=17)
    a = ap.parse_args()
    sam, encoder, decoder, settings = load(a)
    side = sam.image_encoder.img_size
    os.makedirs(a.out, exist_ok=True)
    with torch.no_grad():
        image = torch.zeros(1, 3, side, side)
        export(encoder, (image,), os.path.join(a.out, "encoder.onnx"),
               ["image"], ["image_embeddings"], [], a.opset)
        one_data_file(os.path.join(a.out, "encoder.onnx"))
        emb = encoder(image)
        # Three prompts: an example batch of 2 can be confused with the padding point's
        # axis (also 2) by a tracer. Labels are floats holding 1 (foreground).
        pts = torch.tensor([[[side / 2, side / 2]], [[side / 4, side / 3]], [[side / 5, side / 7]]])
        lab = torch.ones(3, 1, dtype=torch.float32)
        export(decoder, (emb, pts, lab), os.path.join(a.out, "decoder.onnx"),
               ["image_embeddings", "point_coords", "point_labels"],
               ["low_res_masks", "iou_predictions"],
               ["point_coords", "point_labels", "low_res_masks", "iou_predictions"], a.opset)
    if settings:
        with open(os.path.join(a.out, "sam.json"), "w") as f:
            json.dump(settings, f)
    verify(a.out, a, side)
    print(f"wrote {a.out}/encoder.onnx and {a.out}/decoder.onnx (S = {side})")


if __name__ == "__main__":
    main()
