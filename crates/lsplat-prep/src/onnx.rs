//! SAM and CLIP through ONNX Runtime (`lsplat-models`' sessions), on the contracts of
//! docs/formats.md: a SAM model folder holds `encoder.onnx`, `decoder.onnx` and, for
//! families that do not resize as SAM does (EfficientSAM), `sam.json`; CLIP's image
//! tower is `lsplat-models`' [`ClipImage`].

use std::path::{Path, PathBuf};

use lsplat_models::{ClipImage, Runtime};
use lsplat_models::{DType, Input, OnnxModel, SessionOptions, TensorInfo};

use crate::PrepError;
use crate::model::{ClipEncoder, Decoded, Embedding, ImageEncoder, InputResize, MaskDecoder};
use crate::resize::Image8;

/// The encoder file of a SAM model folder.
pub const ENCODER_FILE: &str = "encoder.onnx";
/// The decoder file of a SAM model folder.
pub const DECODER_FILE: &str = "decoder.onnx";
/// The optional settings file of a SAM model folder.
pub const SETTINGS_FILE: &str = "sam.json";

/// `sam.json`: what a SAM family does around its two networks.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FolderSettings {
    /// `"longest_side"` (SAM, MobileSAM; the default) or `"stretch"` (EfficientSAM).
    #[serde(default)]
    resize: InputResize,
}

/// The input resize a SAM folder declares in `sam.json` (SAM's when the file is absent).
pub fn folder_resize(dir: &Path) -> Result<InputResize, PrepError> {
    let path = dir.join(SETTINGS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(InputResize::LongestSide),
        Err(e) => return Err(PrepError::io(path, e)),
    };
    let s: FolderSettings = serde_json::from_str(&text).map_err(|e| {
        contract(
            &path,
            format!("not a valid SAM settings file: {e}; it holds {{\"resize\": \"longest_side\" | \"stretch\"}}"),
        )
    })?;
    Ok(s.resize)
}

fn contract(path: &Path, problem: String) -> PrepError {
    PrepError::model(
        path.display().to_string(),
        format!("{problem} (docs/formats.md, SAM model folder)"),
    )
}

fn find<'a>(list: &'a [TensorInfo], name: &str) -> Option<&'a TensorInfo> {
    list.iter().find(|t| t.name == name)
}

/// Checks one tensor: float32, rank and the fixed sizes given (`None` = any).
fn check_tensor(
    path: &Path,
    what: &str,
    list: &[TensorInfo],
    name: &str,
    dims: &[Option<usize>],
) -> Result<(), PrepError> {
    let have = list
        .iter()
        .map(|t| t.describe())
        .collect::<Vec<_>>()
        .join(", ");
    let t = find(list, name)
        .ok_or_else(|| contract(path, format!("no {what} `{name}` (it has {have})")))?;
    let ok = t.dtype == Some(DType::F32)
        && t.dims.as_ref().is_some_and(|d| {
            d.len() == dims.len()
                && d.iter().zip(dims).all(|(h, w)| match (h, w) {
                    (Some(h), Some(w)) => h == w,
                    _ => true,
                })
        });
    if !ok {
        let want = dims
            .iter()
            .map(|d| d.map_or("*".into(), |v| v.to_string()))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(contract(
            path,
            format!("{what} {} must be float32 [{want}]", t.describe()),
        ));
    }
    Ok(())
}

/// SAM's image encoder from `encoder.onnx`.
#[derive(Debug)]
pub struct SamEncoder {
    model: OnnxModel,
    side: usize,
    resize: InputResize,
}

/// SAM's prompt decoder from `decoder.onnx`.
#[derive(Debug)]
pub struct SamDecoder {
    model: OnnxModel,
}

/// Loads a SAM model folder and checks both files against the contract.
pub fn load_sam(
    dir: &Path,
    rt: &Runtime,
    opts: &SessionOptions,
) -> Result<(SamEncoder, SamDecoder), PrepError> {
    if !dir.is_dir() {
        return Err(PrepError::model(
            dir.display().to_string(),
            "no such SAM model folder (it holds encoder.onnx and decoder.onnx; scripts/export_sam.py makes one)",
        ));
    }
    let (ep, dp): (PathBuf, PathBuf) = (dir.join(ENCODER_FILE), dir.join(DECODER_FILE));
    let resize = folder_resize(dir)?;
    let enc = OnnxModel::load(&ep, rt, opts)?;
    if enc.inputs().len() != 1 {
        return Err(contract(
            &ep,
            format!(
                "the encoder must have one input `image`, not {}",
                enc.inputs().len()
            ),
        ));
    }
    check_tensor(
        &ep,
        "input",
        enc.inputs(),
        "image",
        &[Some(1), Some(3), None, None],
    )?;
    let dims = find(enc.inputs(), "image")
        .and_then(|t| t.dims.clone())
        .unwrap_or_default();
    let side = match (
        dims.get(2).copied().flatten(),
        dims.get(3).copied().flatten(),
    ) {
        (Some(a), Some(b)) if a == b && a >= 16 => a,
        _ => {
            return Err(contract(
                &ep,
                "input `image` must have a fixed square size [1, 3, S, S] (S = 1024 for SAM)"
                    .into(),
            ));
        }
    };
    if find(enc.outputs(), "image_embeddings").is_none() {
        return Err(contract(&ep, "no output `image_embeddings`".into()));
    }
    let dec = OnnxModel::load(&dp, rt, opts)?;
    if dec.inputs().len() != 3 {
        let have = dec
            .inputs()
            .iter()
            .map(|t| t.describe())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(contract(
            &dp,
            format!(
                "the decoder's inputs are {have}, but the contract is image_embeddings, point_coords, point_labels"
            ),
        ));
    }
    check_tensor(
        &dp,
        "input",
        dec.inputs(),
        "point_coords",
        &[None, Some(1), Some(2)],
    )?;
    check_tensor(&dp, "input", dec.inputs(), "point_labels", &[None, Some(1)])?;
    if find(dec.inputs(), "image_embeddings").is_none() {
        return Err(contract(&dp, "no input `image_embeddings`".into()));
    }
    check_tensor(
        &dp,
        "output",
        dec.outputs(),
        "low_res_masks",
        &[None, Some(3), None, None],
    )?;
    check_tensor(
        &dp,
        "output",
        dec.outputs(),
        "iou_predictions",
        &[None, Some(3)],
    )?;
    Ok((
        SamEncoder {
            model: enc,
            side,
            resize,
        },
        SamDecoder { model: dec },
    ))
}

impl ImageEncoder for SamEncoder {
    fn input_size(&self) -> usize {
        self.side
    }

    fn resize(&self) -> InputResize {
        self.resize
    }

    fn encode(&mut self, image: &[f32]) -> Result<Embedding, PrepError> {
        let s = self.side;
        let out = self
            .model
            .run_all(&[("image", Input::F32(&[1, 3, s, s], image))])?;
        let (_, shape, data) = out
            .into_iter()
            .find(|(n, _, _)| n == "image_embeddings")
            .ok_or_else(|| contract(self.model.path(), "no output `image_embeddings`".into()))?;
        Ok(Embedding { shape, data })
    }
}

impl MaskDecoder for SamDecoder {
    fn decode(&mut self, embedding: &Embedding, points: &[[f32; 2]]) -> Result<Decoded, PrepError> {
        let b = points.len();
        let coords: Vec<f32> = points.iter().flatten().copied().collect();
        let labels = vec![1f32; b];
        let out = self.model.run_all(&[
            (
                "image_embeddings",
                Input::F32(&embedding.shape, &embedding.data),
            ),
            ("point_coords", Input::F32(&[b, 1, 2], &coords)),
            ("point_labels", Input::F32(&[b, 1], &labels)),
        ])?;
        let path = self.model.path().to_path_buf();
        let mut masks = None;
        let mut iou = None;
        for (name, shape, data) in out {
            match name.as_str() {
                "low_res_masks" => masks = Some((shape, data)),
                "iou_predictions" => iou = Some((shape, data)),
                _ => {}
            }
        }
        let (Some((ms, masks)), Some((is, iou))) = (masks, iou) else {
            return Err(contract(
                &path,
                "missing output low_res_masks or iou_predictions".into(),
            ));
        };
        if ms.len() != 4 || ms[0] != b || ms[1] != 3 || ms[2] != ms[3] || ms[2] == 0 || is != [b, 3]
        {
            return Err(contract(
                &path,
                format!(
                    "for {b} prompts it returned low_res_masks {ms:?} and iou_predictions {is:?}, expected [{b}, 3, M, M] and [{b}, 3]"
                ),
            ));
        }
        Ok(Decoded {
            masks,
            side: ms[2],
            iou,
        })
    }

    fn on_accelerator(&self) -> bool {
        self.model.on_accelerator()
    }
}

/// LangSplat's CLIP normalisation (`torchvision.transforms.Normalize`: OpenAI CLIP's
/// mean and standard deviation, as float32).
pub const CLIP_MEAN: [f32; 3] = lsplat_models::preprocess::MEAN;
/// See [`CLIP_MEAN`].
pub const CLIP_STD: [f32; 3] = lsplat_models::preprocess::STD;

/// LangSplat's CLIP input for 224×224 crops: `v / 255`, then `(x − mean) / std`,
/// channel-major `[N, 3, 224, 224]`.
pub fn clip_pixels(crops: &[Image8]) -> Vec<f32> {
    let mut out = Vec::with_capacity(crops.len() * 3 * 224 * 224);
    for c in crops {
        let n = c.width * c.height;
        for ch in 0..3 {
            out.extend(
                c.data
                    .iter()
                    .skip(ch)
                    .step_by(3)
                    .take(n)
                    .map(|&v| (v as f32 / 255.0 - CLIP_MEAN[ch]) / CLIP_STD[ch]),
            );
        }
    }
    out
}

/// CLIP's image tower through `lsplat-models`.
#[derive(Debug)]
pub struct OnnxClip {
    /// The image encoder.
    pub image: ClipImage,
    /// Its output width.
    pub dim: usize,
}

impl OnnxClip {
    /// Wraps a loaded image encoder; its width is found by encoding one black crop.
    pub fn new(mut image: ClipImage) -> Result<OnnxClip, PrepError> {
        let probe = clip_pixels(&[Image8::zeros(224, 224, 3)]);
        let (dim, _) = image.encode_pixels(&probe, &mut |_, _| {})?;
        Ok(OnnxClip { image, dim })
    }
}

impl ClipEncoder for OnnxClip {
    fn dim(&self) -> usize {
        self.dim
    }
    fn encode(&mut self, crops: &[Image8]) -> Result<Vec<f32>, PrepError> {
        if crops.is_empty() {
            return Ok(Vec::new());
        }
        let (_, f) = self
            .image
            .encode_pixels(&clip_pixels(crops), &mut |_, _| {})?;
        Ok(f)
    }

    fn on_accelerator(&self) -> bool {
        self.image.model().on_accelerator()
    }
}

/// SAM's two networks and CLIP's image tower loaded from their folders as `preprocess`
/// runs them: on the ONNX Runtime of `onnx.runtime`, with `device`'s provider and
/// threads, CLIP's image file `preprocess.clip_image_file` (the vocabulary and
/// `text.onnx` may be absent) and `preprocess.clip_batch` crops per call.
pub struct OnnxModels {
    /// SAM's image encoder.
    pub encoder: SamEncoder,
    /// SAM's prompt decoder.
    pub decoder: SamDecoder,
    /// CLIP's image tower.
    pub clip: OnnxClip,
}

impl OnnxModels {
    /// Loads and checks the three networks (one clear error naming the file).
    pub fn load(sam: &Path, clip: &Path, cfg: &lsplat_core::Config) -> Result<Self, PrepError> {
        let rt = lsplat_models::runtime::load(cfg.onnx.runtime.as_deref())?;
        let opts = SessionOptions::from_device(&cfg.device);
        let (encoder, decoder) = load_sam(sam, rt, &opts)?;
        let mut model = lsplat_models::ClipModel::at(clip, cfg.models.clip_vocab.as_deref())?;
        model.image = clip.join(&cfg.preprocess.clip_image_file);
        if !model.image.is_file() {
            return Err(PrepError::model(
                model.image.display().to_string(),
                format!(
                    "no such CLIP image encoder (preprocess.clip_image_file = {:?}; scripts/export_clip.py makes image.onnx, scripts/quantize_clip.py makes image.int8.onnx)",
                    cfg.preprocess.clip_image_file
                ),
            ));
        }
        let mut image = ClipImage::load(&model, rt, &opts)?;
        image.batch = cfg.preprocess.clip_batch as usize;
        Ok(OnnxModels {
            encoder,
            decoder,
            clip: OnnxClip::new(image)?,
        })
    }

    /// The three as [`crate::run::preprocess`] takes them.
    pub fn models(&mut self) -> crate::run::Models<'_> {
        crate::run::Models {
            encoder: &mut self.encoder,
            decoder: &mut self.decoder,
            clip: &mut self.clip,
        }
    }
}
