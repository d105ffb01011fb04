//! From rendered features to unit CLIP-space features, and relevancy maps of a whole
//! image: the piece `query` and `eval lerf` share.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use lsplat_ae::Autoencoder;
use lsplat_core::Camera;
use lsplat_data::embeddings::TextEmbeddings;
use lsplat_device::Backend;
use lsplat_query::{CANONICAL, normalize_rows, relevancy};

use crate::views::Views;

/// Pixels lifted and scored at once.
const CHUNK: usize = 8192;

/// How rendered features become unit features comparable with text embeddings.
pub enum Lift {
    /// LangSplat V1: decode the rendered codes through the autoencoder.
    Decode {
        /// The model.
        model: Box<Autoencoder>,
        /// Its file (for errors).
        path: PathBuf,
    },
    /// Features already in the text space (512-D runs): normalise each pixel.
    Direct,
}

impl Lift {
    /// The lift for a run of `channels` channels (`model`: an autoencoder file), after
    /// checking every width against the text embeddings.
    pub fn new(
        run_dir: &Path,
        channels: usize,
        model: Option<&Path>,
        text: &TextEmbeddings,
    ) -> Result<Lift> {
        let lift = match model {
            Some(p) => {
                let m = lsplat_ae::load_model(p)?.model;
                lsplat_ae::file::check_code_dim(
                    p,
                    &m,
                    channels,
                    &format!("run {}", run_dir.display()),
                )?;
                Lift::Decode {
                    model: Box::new(m),
                    path: p.to_path_buf(),
                }
            }
            None => Lift::Direct,
        };
        let dim = lift.dim(channels);
        if text.dim != dim {
            match &lift {
                Lift::Decode { path, .. } => bail!(
                    "{}: the embeddings are {}-D but the autoencoder {} decodes to {dim}-D",
                    text.path.display(),
                    text.dim,
                    path.display()
                ),
                Lift::Direct if channels < text.dim && channels <= 16 => bail!(
                    "run {} has {channels}-channel features (LangSplat V1 codes?): give --model AE to decode them to {}-D",
                    run_dir.display(),
                    text.dim
                ),
                Lift::Direct => bail!(
                    "{}: the embeddings are {}-D but the run {} has {dim}-D features",
                    text.path.display(),
                    text.dim,
                    run_dir.display()
                ),
            }
        }
        Ok(lift)
    }

    /// Width of the lifted features.
    pub fn dim(&self, channels: usize) -> usize {
        match self {
            Lift::Decode { model, .. } => model.input_dim(),
            Lift::Direct => channels,
        }
    }

    /// Unit `[pixels, dim]` features of `[pixels, channels]` rendered ones.
    pub fn apply(&self, rendered: &[f32], channels: usize) -> Result<Vec<f32>> {
        Ok(match self {
            Lift::Decode { model, .. } => {
                let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
                model.decode(rendered, threads)?
            }
            Lift::Direct => {
                let mut v = rendered.to_vec();
                normalize_rows(&mut v, channels);
                v
            }
        })
    }
}

/// Positive embeddings `[Q, D]` of `queries` and the canonical negatives `[4, D]`; a
/// missing phrase is an error naming the file and every missing phrase.
pub fn text_rows(text: &TextEmbeddings, queries: &[String]) -> Result<(Vec<f32>, Vec<f32>)> {
    let mut wanted: Vec<&str> = queries.iter().map(String::as_str).collect();
    wanted.extend(CANONICAL);
    text.stack(&wanted)?;
    let q: Vec<&str> = queries.iter().map(String::as_str).collect();
    Ok((text.stack(&q)?, text.stack(&CANONICAL)?))
}

/// Relevancy maps `[Q][H·W]` of a camera and the picture of its rendered features.
pub struct ImageRelevancy {
    /// Per query, row-major `[H, W]`.
    pub maps: Vec<Vec<f32>>,
    /// RGB8 picture of the rendered features (empty without a colouring).
    pub rgb: Vec<u8>,
}

/// Renders `cam`, lifts every pixel and scores it against `positives` / `negatives`.
pub fn image_relevancy<B: Backend>(
    views: &Views<'_, B>,
    cam: &Camera,
    lift: &Lift,
    (positives, negatives): (&[f32], &[f32]),
    colouring: Option<&lsplat_query::picture::Colouring>,
) -> Result<ImageRelevancy> {
    let c = views.channels();
    let dim = lift.dim(c);
    let q = positives.len() / dim;
    let hw = cam.pixel_count();
    let mut maps = vec![vec![0f32; hw]; q];
    let mut rgb = Vec::with_capacity(hw * 3);
    views.render(cam, |band| {
        let base = band.y0 as usize * band.width as usize;
        if let Some(c) = colouring {
            rgb.extend(c.rgb(band.features, band.alpha));
        }
        for (k, chunk) in band.features.chunks(CHUNK * c).enumerate() {
            let lifted = lift.apply(chunk, c)?;
            let rel = relevancy(&lifted, dim, positives, negatives)?;
            let p0 = base + k * CHUNK;
            for (i, row) in rel.chunks_exact(q.max(1)).enumerate() {
                for (m, v) in maps.iter_mut().zip(row) {
                    m[p0 + i] = *v;
                }
            }
        }
        Ok(())
    })?;
    Ok(ImageRelevancy { maps, rgb })
}
