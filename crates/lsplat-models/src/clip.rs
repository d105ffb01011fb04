//! CLIP's encoders on the contract of docs/formats.md.
//!
//! A CLIP model is a folder: `text.onnx` (input `input_ids`: int64 `[B, 77]`),
//! `image.onnx` (input `pixel_values`: float32 `[B, 3, 224, 224]`), each with the
//! embedding `[B, D]` float32 as its first output, and the vocabulary
//! `bpe_simple_vocab_16e6.txt.gz`. The engine L2-normalises the embeddings.

use std::path::{Path, PathBuf};

use crate::contract::{DType, TensorSpec};
use crate::preprocess::{RgbImage, SIZE, clip_pixels};
use crate::session::{OnnxModel, SessionOptions};
use crate::tokenizer::{CONTEXT, Tokenizer};
use crate::{ModelError, Runtime};

/// The text encoder's file in a CLIP folder.
pub const TEXT_FILE: &str = "text.onnx";
/// The image encoder's file in a CLIP folder.
pub const IMAGE_FILE: &str = "image.onnx";
/// The vocabulary's file in a CLIP folder.
pub const VOCAB_FILE: &str = "bpe_simple_vocab_16e6.txt.gz";
/// The text encoder's input.
pub const TEXT_INPUT: &str = "input_ids";
/// The image encoder's input.
pub const IMAGE_INPUT: &str = "pixel_values";
/// Texts or images per encoder run unless told otherwise.
pub const DEFAULT_BATCH: usize = 32;

/// The files of a CLIP model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClipModel {
    /// The model folder.
    pub dir: PathBuf,
    /// `text.onnx`.
    pub text: PathBuf,
    /// `image.onnx`.
    pub image: PathBuf,
    /// The vocabulary.
    pub vocab: PathBuf,
}

impl ClipModel {
    /// The CLIP model in `dir`; `vocab` overrides the folder's vocabulary. Files are
    /// checked when an encoder is loaded; a missing folder is an error now.
    pub fn at(dir: &Path, vocab: Option<&Path>) -> Result<ClipModel, ModelError> {
        if !dir.is_dir() {
            return Err(ModelError::model(
                dir,
                "no such CLIP model folder (it holds text.onnx, image.onnx and bpe_simple_vocab_16e6.txt.gz; scripts/export_clip.py makes one)",
            ));
        }
        Ok(ClipModel {
            dir: dir.to_path_buf(),
            text: dir.join(TEXT_FILE),
            image: dir.join(IMAGE_FILE),
            vocab: vocab.map_or_else(|| dir.join(VOCAB_FILE), Path::to_path_buf),
        })
    }

    /// A short identity of the text encoder and vocabulary (their paths, sizes and
    /// modification times, hashed): cached text embeddings are keyed by it.
    pub fn text_identity(&self) -> Result<String, ModelError> {
        identity(&[&self.text, &self.vocab])
    }

    /// The same for the image encoder.
    pub fn image_identity(&self) -> Result<String, ModelError> {
        identity(&[&self.image])
    }
}

/// FNV-1a over the files' canonical paths, sizes and modification times.
fn identity(files: &[&Path]) -> Result<String, ModelError> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for f in files {
        let meta = std::fs::metadata(f).map_err(|e| ModelError::io(*f, e))?;
        let canon = f.canonicalize().unwrap_or_else(|_| f.to_path_buf());
        eat(canon.to_string_lossy().as_bytes());
        eat(&meta.len().to_le_bytes());
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        eat(&mtime.to_le_bytes());
    }
    Ok(format!("{h:016x}"))
}

/// Divides each `dim`-wide row by its length; a zero or non-finite row is an error.
fn normalise_rows(path: &Path, values: &mut [f32], dim: usize) -> Result<(), ModelError> {
    for (i, row) in values.chunks_exact_mut(dim).enumerate() {
        let n = row
            .iter()
            .map(|v| (*v as f64) * (*v as f64))
            .sum::<f64>()
            .sqrt();
        if !(n > 0.0 && n.is_finite()) {
            return Err(ModelError::Run {
                path: path.to_path_buf(),
                problem: format!("embedding {i} has length {n} (zero or not finite)"),
            });
        }
        row.iter_mut().for_each(|v| *v = (*v as f64 / n) as f32);
    }
    Ok(())
}

/// CLIP's text encoder with its tokenizer.
#[derive(Debug)]
pub struct ClipText {
    model: OnnxModel,
    tokenizer: Tokenizer,
    /// Texts per run.
    pub batch: usize,
}

impl ClipText {
    /// Loads `text.onnx` and the vocabulary of `clip`; checks the contract.
    pub fn load(
        clip: &ClipModel,
        rt: &Runtime,
        opts: &SessionOptions,
    ) -> Result<ClipText, ModelError> {
        let tokenizer = Tokenizer::from_file(&clip.vocab)?;
        let model = OnnxModel::load(&clip.text, rt, opts)?;
        model.check(
            &[TensorSpec {
                name: Some(TEXT_INPUT),
                dtype: DType::I64,
                dims: &[None, Some(CONTEXT)],
            }],
            &TensorSpec {
                name: None,
                dtype: DType::F32,
                dims: &[None, None],
            },
        )?;
        Ok(ClipText {
            model,
            tokenizer,
            batch: DEFAULT_BATCH,
        })
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The ONNX model.
    pub fn model(&self) -> &OnnxModel {
        &self.model
    }

    /// `[P, D]` unit embeddings of `texts` and the width D. A text longer than the
    /// context is cut (a warning names it); an empty one is an error.
    pub fn encode(
        &mut self,
        texts: &[&str],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(usize, Vec<f32>), ModelError> {
        if texts.is_empty() {
            return Err(ModelError::Query("no text to encode".into()));
        }
        let mut ids = Vec::with_capacity(texts.len() * CONTEXT);
        for t in texts {
            let tok = self.tokenizer.tokenize(t)?;
            if tok.truncated() {
                tracing::warn!(
                    "the query {t:?} has {} tokens; CLIP reads {CONTEXT}: it is cut to fit",
                    tok.full_len
                );
            }
            ids.extend(tok.ids);
        }
        let (dim, mut values) =
            self.model
                .run_batched_i64(TEXT_INPUT, &ids, &[CONTEXT], self.batch, progress)?;
        normalise_rows(self.model.path(), &mut values, dim)?;
        Ok((dim, values))
    }
}

/// CLIP's image encoder.
#[derive(Debug)]
pub struct ClipImage {
    model: OnnxModel,
    /// Images per run.
    pub batch: usize,
}

impl ClipImage {
    /// Loads `image.onnx` of `clip`; checks the contract.
    pub fn load(
        clip: &ClipModel,
        rt: &Runtime,
        opts: &SessionOptions,
    ) -> Result<ClipImage, ModelError> {
        let model = OnnxModel::load(&clip.image, rt, opts)?;
        model.check(
            &[TensorSpec {
                name: Some(IMAGE_INPUT),
                dtype: DType::F32,
                dims: &[None, Some(3), Some(SIZE), Some(SIZE)],
            }],
            &TensorSpec {
                name: None,
                dtype: DType::F32,
                dims: &[None, None],
            },
        )?;
        Ok(ClipImage {
            model,
            batch: DEFAULT_BATCH,
        })
    }

    /// The ONNX model.
    pub fn model(&self) -> &OnnxModel {
        &self.model
    }

    /// `[N, D]` unit embeddings of `n` preprocessed crops (`pixels`: `[N, 3, 224, 224]`,
    /// normalised as [`crate::preprocess::clip_pixels`] does) and the width D.
    pub fn encode_pixels(
        &mut self,
        pixels: &[f32],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(usize, Vec<f32>), ModelError> {
        let per = 3 * SIZE * SIZE;
        if pixels.is_empty() || !pixels.len().is_multiple_of(per) {
            return Err(ModelError::Shape(format!(
                "{} values are not a whole number of [3, 224, 224] images",
                pixels.len()
            )));
        }
        let (dim, mut values) = self.model.run_batched_f32(
            IMAGE_INPUT,
            pixels,
            &[3, SIZE, SIZE],
            self.batch,
            progress,
        )?;
        normalise_rows(self.model.path(), &mut values, dim)?;
        Ok((dim, values))
    }

    /// `[N, D]` unit embeddings of whole images, each through open_clip's transform.
    pub fn encode_images(
        &mut self,
        images: &[RgbImage],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(usize, Vec<f32>), ModelError> {
        let mut pixels = Vec::with_capacity(images.len() * 3 * SIZE * SIZE);
        for img in images {
            pixels.extend(clip_pixels(img));
        }
        self.encode_pixels(&pixels, progress)
    }
}
