"""Export a SAM checkpoint to lsplat-engine's SAM model folder (docs/formats.md):
`encoder.onnx` (image [1, 3, 1024, 1024] -> image_embeddings) and `decoder.onnx`
(image_embeddings, point_coords [B, 1, 2], point_labels [B, 1] -> low_res_masks
[B, 3, 256, 256], iou_predictions [B, 3]).

Needs torch and the model's package: `segment-anything` (vit_h, vit_l, vit_b),
`mobile_sam` (vit_t) or EfficientSAM's `efficient_sam` (efficient_sam_vitt,
efficient_sam_vits; its folder also gets `sam.json` with `"resize": "stretch"`, since
EfficientSAM stretches the image to 1024 x 1024 where SAM pads it). This script could
not be run where lsplat-engine is developed (torch is not installable there); the
engine's tests use scripts/sam_onnx.py's synthetic graphs on the same contract instead.

Usage: python export_sam.py --checkpoint sam_vit_h_4b8939.pth --model-type vit_h --out sam_vit_h
       python export_sam.py --checkpoint mobile_sam.pt --model-type vit_t --out mobile_sam
       python export_sam.py --checkpoint weights/efficient_sam_vitt.pt --model-type efficient_sam_vitt --out esam_ti
"""
import argparse
import json
import os

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
        torch.onnx.export(
            encoder, (image,), os.path.join(a.out, "encoder.onnx"),
            input_names=["image"], output_names=["image_embeddings"], opset_version=a.opset,
        )
        emb = encoder(image)
        pts = torch.tensor([[[side / 2, side / 2]], [[side / 4, side / 3]]], dtype=torch.float32)
        lab = torch.ones(2, 1, dtype=torch.float32)
        # The prompt encoder expects integer-like labels in a float tensor; 1 = foreground.
        torch.onnx.export(
            decoder, (emb, pts, lab), os.path.join(a.out, "decoder.onnx"),
            input_names=["image_embeddings", "point_coords", "point_labels"],
            output_names=["low_res_masks", "iou_predictions"],
            dynamic_axes={
                "point_coords": {0: "B"},
                "point_labels": {0: "B"},
                "low_res_masks": {0: "B"},
                "iou_predictions": {0: "B"},
            },
            opset_version=a.opset,
        )
    if settings:
        with open(os.path.join(a.out, "sam.json"), "w") as f:
            json.dump(settings, f)
    print(f"wrote {a.out}/encoder.onnx and {a.out}/decoder.onnx (S = {side})")


if __name__ == "__main__":
    main()
