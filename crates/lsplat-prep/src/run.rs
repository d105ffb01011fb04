//! `preprocess` over a folder: one image at a time into LangSplat's
//! `language_features/<stem>_f.npy` and `_s.npy`, each written under a unique
//! temporary name and renamed when complete. An image whose two files exist is done,
//! so a killed run resumes at the first unfinished image; the folder is locked while
//! a run writes it. Memory depends on one image, not on how many there are.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lsplat_core::preprocess::PreprocessConfig;
use lsplat_data::io::write_npy_f32;
use lsplat_data::run::RunDir;

use crate::image::{Resolution, image_size, load};
use crate::levels::{LangSplatArrays, arrays, finish_lists};
use crate::model::{ClipEncoder, ImageEncoder, MaskDecoder};
use crate::{PrepError, Timings, amg};

/// The folder LangSplat's training reads, inside the output folder.
pub const FEATURES_DIR: &str = "language_features";

/// The three networks.
pub struct Models<'a> {
    /// SAM's image encoder.
    pub encoder: &'a mut dyn ImageEncoder,
    /// SAM's prompt decoder.
    pub decoder: &'a mut dyn MaskDecoder,
    /// CLIP's image tower.
    pub clip: &'a mut dyn ClipEncoder,
}

/// Where a run stands, for progress lines.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Images finished (including those found done).
    pub done: usize,
    /// Images in the folder.
    pub total: usize,
    /// Images processed by this run.
    pub processed: usize,
    /// Seconds this run spent processing.
    pub seconds: f64,
    /// The image just finished.
    pub last: Option<String>,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Images in the folder.
    pub images: usize,
    /// Images processed by this run (the others were done already).
    pub processed: usize,
    /// The progress callback stopped the run before every image was done (what was
    /// finished is written; a later run resumes after it).
    pub stopped: bool,
    /// Masks written per level (default, s, m, l), summed over the processed images.
    pub masks: [usize; 4],
    /// Seconds per step, summed over the processed images.
    pub timings: Timings,
}

/// LangSplat's file stem: the file name up to its first `.`.
pub fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.split('.').next().unwrap_or_default().to_string()
}

/// The images of a folder (PNG and JPEG by extension), sorted by file name; an error
/// when there are none or two share a stem.
pub fn list_images(dir: &Path) -> Result<Vec<PathBuf>, PrepError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| PrepError::io(dir, e))? {
        let p = e.map_err(|e| PrepError::io(dir, e))?.path();
        let ext = p
            .extension()
            .map(|x| x.to_string_lossy().to_ascii_lowercase());
        if p.is_file() && matches!(ext.as_deref(), Some("png" | "jpg" | "jpeg")) {
            out.push(p);
        }
    }
    out.sort_by_key(|p| p.file_name().map(|n| n.to_os_string()));
    if out.is_empty() {
        return Err(PrepError::image(
            dir,
            "no .png, .jpg or .jpeg images in this folder",
        ));
    }
    for w in out.windows(2) {
        if stem(&w[0]) == stem(&w[1]) {
            return Err(PrepError::image(
                &w[1],
                format!(
                    "has the same stem `{}` as {}: their feature files would collide",
                    stem(&w[1]),
                    w[0].display()
                ),
            ));
        }
    }
    Ok(out)
}

/// Checks every image's header before any work: readable, and all of one size.
pub fn check_images(images: &[PathBuf]) -> Result<(u32, u32), PrepError> {
    let first = image_size(&images[0])?;
    for p in &images[1..] {
        let s = image_size(p)?;
        if s != first {
            return Err(PrepError::image(
                p,
                format!(
                    "is {}x{}, but {} is {}x{}: the images of a scene must share one size",
                    s.0,
                    s.1,
                    images[0].display(),
                    first.0,
                    first.1
                ),
            ));
        }
    }
    Ok(first)
}

/// Processes one image into its arrays.
pub fn process_image(
    path: &Path,
    res: Resolution,
    cfg: &PreprocessConfig,
    models: &mut Models<'_>,
    timings: &mut Timings,
) -> Result<LangSplatArrays, PrepError> {
    let img = load(path, res)?;
    let generated = amg::generate(&img, cfg, models.encoder, models.decoder, timings)?;
    let lists = finish_lists(&generated, cfg, timings);
    arrays(&img, &lists, models.clip, cfg, timings)
}

/// Runs preprocessing over `images` into `out/language_features/`.
pub fn preprocess(
    images: &[PathBuf],
    out: &Path,
    res: Resolution,
    cfg: &PreprocessConfig,
    models: &mut Models<'_>,
    progress: &mut dyn FnMut(&Progress) -> ControlFlow<()>,
) -> Result<Summary, PrepError> {
    cfg.validate()
        .map_err(|e| PrepError::Config(e.to_string()))?;
    if images.is_empty() {
        return Err(PrepError::Config("no images to preprocess".into()));
    }
    check_images(images)?;
    let dir = out.join(FEATURES_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| PrepError::io(&dir, e))?;
    let _lock = RunDir::resume(&dir)?;
    let done = |p: &Path| {
        let s = stem(p);
        dir.join(format!("{s}_f.npy")).is_file() && dir.join(format!("{s}_s.npy")).is_file()
    };
    let mut summary = Summary {
        images: images.len(),
        ..Summary::default()
    };
    let mut finished = images.iter().filter(|p| done(p)).count();
    let start = Instant::now();
    let report = |finished: usize, processed: usize, last: Option<String>| Progress {
        done: finished,
        total: images.len(),
        processed,
        seconds: start.elapsed().as_secs_f64(),
        last,
    };
    let mut stop = progress(&report(finished, 0, None)).is_break();
    for path in images {
        if done(path) {
            continue;
        }
        if stop {
            summary.stopped = true;
            break;
        }
        let a = process_image(path, res, cfg, models, &mut summary.timings)?;
        let s = stem(path);
        // `_s` first: an image counts as done only when `_f` exists too.
        write_npy_f32(
            &dir.join(format!("{s}_s.npy")),
            &[4, a.height, a.width],
            &a.seg,
        )?;
        write_npy_f32(
            &dir.join(format!("{s}_f.npy")),
            &[a.lengths.iter().sum(), a.dim],
            &a.features,
        )?;
        for (m, n) in summary.masks.iter_mut().zip(a.lengths) {
            *m += n;
        }
        summary.processed += 1;
        finished += 1;
        stop = progress(&report(finished, summary.processed, Some(s))).is_break();
    }
    Ok(summary)
}
