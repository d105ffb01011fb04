//! From rendered features to unit CLIP-space features ([`Lift`]), and relevancy maps
//! of a whole image ([`image_relevancy`]): what `query`, `eval lerf` and the viewer
//! share.

use std::path::{Path, PathBuf};

use lsplat_ae::Autoencoder;
use lsplat_core::Camera;
use lsplat_cpu::gemm::{MatRef, gemm};
use lsplat_data::embeddings::TextEmbeddings;
use lsplat_data::run_dir::Decoder;
use lsplat_device::Backend;
use lsplat_render::views::Views;

use crate::picture::Colouring;
use crate::{CANONICAL, QueryError, normalize_rows, relevancy};

type Result<T, E = QueryError> = std::result::Result<T, E>;

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
    /// LangSplatV2: composited code weights w, whose feature is `Bᵀw` through the
    /// run's codebook B (`[C, D]`). Scored in code space, which gives the same dot
    /// products without forming the D-dimensional features: a pixel lifts to
    /// `w / √(wᵀGw)` (G = B·Bᵀ, so the denominator is |Bᵀw|) and a text row t to
    /// `B·t`.
    Codebook {
        /// B, `[C, D]`.
        matrix: Vec<f32>,
        /// G = B·Bᵀ, `[C, C]` (summed in f64).
        gram: Vec<f32>,
        /// D.
        dim: usize,
        /// The codebook's file (for messages).
        path: PathBuf,
    },
}

impl Lift {
    /// The lift for a run of `channels` channels (`model`: an autoencoder file), after
    /// checking every width against the text embeddings.
    pub fn new(
        run_dir: &Path,
        channels: usize,
        decoder: Option<&Decoder>,
        model: Option<&Path>,
        text: &TextEmbeddings,
    ) -> Result<Lift> {
        let lift = match (decoder, model) {
            (Some(d), Some(p)) => {
                return Err(QueryError::run(
                    run_dir,
                    format!(
                        "decodes its {channels} channels through its own {}; --model {} applies to LangSplat V1 runs",
                        d.file.display(),
                        p.display()
                    ),
                ));
            }
            (Some(d), None) => Lift::codebook(d, channels)?,
            (None, Some(p)) => {
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
            (None, None) => Lift::Direct,
        };
        let dim = lift.text_dim(channels);
        if text.dim != dim {
            let tp = &text.path;
            return Err(match &lift {
                Lift::Decode { path, .. } => QueryError::text(
                    tp,
                    format!(
                        "the embeddings are {}-D but the autoencoder {} decodes to {dim}-D",
                        text.dim,
                        path.display()
                    ),
                ),
                Lift::Direct if channels < text.dim && channels <= 16 => QueryError::run(
                    run_dir,
                    format!(
                        "has {channels}-channel features (LangSplat V1 codes?): give --model AE to decode them to {}-D",
                        text.dim
                    ),
                ),
                Lift::Direct => QueryError::text(
                    tp,
                    format!(
                        "the embeddings are {}-D but the run {} has {dim}-D features",
                        text.dim,
                        run_dir.display()
                    ),
                ),
                Lift::Codebook { path, .. } => QueryError::text(
                    tp,
                    format!(
                        "the embeddings are {}-D but the codebook {} decodes to {dim}-D",
                        text.dim,
                        path.display()
                    ),
                ),
            });
        }
        Ok(lift)
    }

    /// The codebook lift of a run's `decoder` (`[channels, D]`).
    fn codebook(d: &Decoder, channels: usize) -> Result<Lift> {
        if d.dim == 0 || d.matrix.len() != channels * d.dim {
            return Err(QueryError::Shape(format!(
                "{}: {} values are not {channels} codebook rows",
                d.file.display(),
                d.matrix.len()
            )));
        }
        let mut gram = vec![0.0f32; channels * channels];
        for (i, a) in d.matrix.chunks_exact(d.dim).enumerate() {
            for (j, b) in d.matrix.chunks_exact(d.dim).enumerate() {
                gram[i * channels + j] = dot(a, b);
            }
        }
        Ok(Lift::Codebook {
            matrix: d.matrix.clone(),
            gram,
            dim: d.dim,
            path: d.file.clone(),
        })
    }

    /// Width of the lifted features (what [`Self::text`] rows are compared with).
    pub fn dim(&self, channels: usize) -> usize {
        match self {
            Lift::Decode { model, .. } => model.input_dim(),
            Lift::Direct | Lift::Codebook { .. } => channels,
        }
    }

    /// Width of the text embeddings the lift scores against.
    pub fn text_dim(&self, channels: usize) -> usize {
        match self {
            Lift::Codebook { dim, .. } => *dim,
            _ => self.dim(channels),
        }
    }

    /// Text rows `[n, text_dim]` in the lifted space: themselves, or `B·t` per row
    /// for a codebook.
    pub fn text(&self, rows: &[f32]) -> Vec<f32> {
        match self {
            Lift::Codebook { matrix, dim, .. } => rows
                .chunks_exact(*dim)
                .flat_map(|t| matrix.chunks_exact(*dim).map(move |b| dot(b, t)))
                .collect(),
            _ => rows.to_vec(),
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
            Lift::Codebook { gram, .. } => {
                // Gw for every pixel at once, then each pixel's wᵀGw = |Bᵀw|².
                let p = rendered.len() / channels;
                let mut gw = vec![0.0f32; rendered.len()];
                gemm(
                    1.0,
                    MatRef::new(rendered, p, channels),
                    MatRef::new(gram, channels, channels),
                    0.0,
                    &mut gw,
                );
                let mut v = rendered.to_vec();
                for (w, g) in v.chunks_exact_mut(channels).zip(gw.chunks_exact(channels)) {
                    let q: f64 = w
                        .iter()
                        .zip(g)
                        .map(|(&a, &b)| f64::from(a) * f64::from(b))
                        .sum();
                    let scale = if q > 0.0 {
                        (1.0 / q.sqrt()) as f32
                    } else {
                        0.0
                    };
                    w.iter_mut().for_each(|x| *x *= scale);
                }
                v
            }
        })
    }
}

/// The colouring of a run's pictures (`render`, `query`): codes as RGB, or a PCA of the
/// per-Gaussian features — for a run with a decoder (a LangSplatV2 codebook B,
/// `[C, D]`), of the decoded features `Bᵀw`, as a V1 run's 512-D features would be
/// coloured, expressed on the rendered weights: the projection `(Bᵀw/α − μ)·a` of the
/// decoded feature is `(w/α)·(B·a) − μ·a`, so each axis becomes `B·a` and `μ·a` moves
/// into the range.
pub fn colouring(run: &lsplat_data::run_dir::RunInputs) -> Colouring {
    let c = run.channels;
    let Some(d) = run.decoder.as_ref().filter(|d| d.matrix.len() == c * d.dim) else {
        return Colouring::fit(&run.features, c);
    };
    let n = run.features.len() / c.max(1);
    let stride = n.div_ceil(crate::picture::PCA_SAMPLE).max(1);
    let sample: Vec<f32> = run
        .features
        .chunks_exact(c)
        .step_by(stride)
        .flatten()
        .copied()
        .collect();
    let m = sample.len() / c;
    let mut decoded = vec![0f32; m * d.dim];
    gemm(
        1.0,
        MatRef::new(&sample, m, c),
        MatRef::new(&d.matrix, c, d.dim),
        0.0,
        &mut decoded,
    );
    let Colouring::Pca {
        mean, axes, lo, hi, ..
    } = Colouring::fit(&decoded, d.dim)
    else {
        return Colouring::fit(&run.features, c);
    };
    let mut on_weights = vec![0f32; 3 * c];
    let (mut lo2, mut hi2) = (lo, hi);
    for k in 0..3 {
        let ax = &axes[k * d.dim..(k + 1) * d.dim];
        for (j, row) in d.matrix.chunks_exact(d.dim).enumerate() {
            on_weights[k * c + j] = dot(row, ax);
        }
        let shift = dot(&mean, ax);
        lo2[k] += shift;
        hi2[k] += shift;
    }
    Colouring::Pca {
        dim: c,
        mean: vec![0.0; c],
        axes: on_weights,
        lo: lo2,
        hi: hi2,
    }
}

/// `a·b` summed in f64, rounded to f32.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum::<f64>() as f32
}

/// Positive embeddings `[Q, D]` of `queries` and the canonical negatives `[4, D]`; a
/// missing phrase is an error naming the file and every missing phrase.
pub fn text_rows(text: &TextEmbeddings, queries: &[String]) -> Result<(Vec<f32>, Vec<f32>)> {
    Ok(text.query_rows(queries, &CANONICAL)?)
}

/// Relevancy maps `[Q][H·W]` of a camera and the picture of its rendered features.
pub struct ImageRelevancy {
    /// Per query, row-major `[H, W]`.
    pub maps: Vec<Vec<f32>>,
    /// RGB8 picture of the rendered features (empty without a colouring).
    pub rgb: Vec<u8>,
    /// Rendered opacity (accumulated alpha) per pixel, row-major `[H, W]`.
    pub alpha: Vec<f32>,
}

/// Renders `cam`, lifts every pixel and scores it against `positives` / `negatives`.
pub fn image_relevancy<B: Backend>(
    views: &Views<'_, B>,
    cam: &Camera,
    lift: &Lift,
    (positives, negatives): (&[f32], &[f32]),
    colouring: Option<&Colouring>,
) -> Result<ImageRelevancy> {
    let c = views.channels();
    let dim = lift.dim(c);
    let q = positives.len() / dim;
    let hw = cam.pixel_count();
    let mut maps = vec![vec![0f32; hw]; q];
    let mut rgb = Vec::with_capacity(hw * 3);
    let mut alpha = Vec::with_capacity(hw);
    views.render::<QueryError>(cam, |band| {
        let base = band.y0 as usize * band.width as usize;
        alpha.extend_from_slice(band.alpha);
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
    Ok(ImageRelevancy { maps, rgb, alpha })
}

/// Similarities `[rows, T]` of `[rows, channels]` features (per Gaussian, or per
/// pixel) with `[T, text_dim]` text rows, lifted chunk by chunk: cosines in the text
/// space (features and text rows are unit).
pub fn row_similarities(
    features: &[f32],
    channels: usize,
    lift: &Lift,
    text: &[f32],
) -> Result<Vec<f32>> {
    let dim = lift.dim(channels);
    let lifted_text = lift.text(text);
    let t = lifted_text.len() / dim.max(1);
    let mut out = Vec::with_capacity(features.len() / channels.max(1) * t);
    for chunk in features.chunks(CHUNK * channels) {
        let lifted = lift.apply(chunk, channels)?;
        let rows = lifted.len() / dim;
        let start = out.len();
        out.resize(start + rows * t, 0.0);
        gemm(
            1.0,
            MatRef::new(&lifted, rows, dim),
            MatRef::new(&lifted_text, t, dim).t(),
            0.0,
            &mut out[start..],
        );
    }
    Ok(out)
}

/// Relevancy `[rows, Q]` from `[rows, Q + J]` similarities whose last `J` columns are
/// the canonical negatives'.
pub fn relevancy_of(sims: &[f32], q: usize, j: usize) -> Vec<f32> {
    sims.chunks_exact(q + j)
        .flat_map(|row| {
            let (pos, neg) = row.split_at(q);
            pos.iter()
                .map(|&s| crate::relevancy::from_similarities(s, neg))
        })
        .collect()
}

/// Renders `cam` and returns the similarities `[H·W, T]` of its lifted pixels with
/// `text` rows (as [`row_similarities`]).
pub fn image_similarities<B: Backend>(
    views: &Views<'_, B>,
    cam: &Camera,
    lift: &Lift,
    text: &[f32],
) -> Result<Vec<f32>> {
    let c = views.channels();
    let mut out = Vec::new();
    views.render::<QueryError>(cam, |band| {
        out.extend(row_similarities(band.features, c, lift, text)?);
        Ok(())
    })?;
    Ok(out)
}
