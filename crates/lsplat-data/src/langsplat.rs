//! LangSplat language-feature folders (`language_features/`, `language_features_dim3/`).
//!
//! Per image stem: `<stem>_f.npy`, float32 `[N, D]` (rows grouped default | s | m |
//! l), and `<stem>_s.npy`, float32 `[4, H, W]` holding `-1` or a global row of `_f`.
//! Training level ℓ reads map ℓ; its labels keep only the rows that map uses.

use std::path::{Path, PathBuf};

use crate::npy::read_npy;
use crate::{DataError, ImageLabels};

/// Number of levels in a segmentation file (default, s, m, l).
pub const LEVELS: usize = 4;

/// The arrays of one LangSplat image, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct LangSplatImage {
    /// Image stem.
    pub stem: String,
    /// Feature table `[rows, dim]` row-major.
    pub features: Vec<f32>,
    /// Feature dimension D.
    pub dim: usize,
    /// Segmentation maps `[4, height, width]`: `-1` or a row of `features`.
    pub seg: Vec<i32>,
    /// Image width.
    pub width: u32,
    /// Image height.
    pub height: u32,
}

/// Paths of the feature and segmentation files of `stem`.
pub fn image_paths(dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{stem}_f.npy")),
        dir.join(format!("{stem}_s.npy")),
    )
}

/// The image stems of a LangSplat folder, sorted; every `_f.npy` needs its `_s.npy`
/// and vice versa.
pub fn list_stems(dir: &Path) -> Result<Vec<String>, DataError> {
    let mut f = Vec::new();
    let mut s = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))? {
        let name = entry
            .map_err(|e| DataError::io(dir, e))?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if let Some(stem) = name.strip_suffix("_f.npy") {
            f.push(stem.to_string());
        } else if let Some(stem) = name.strip_suffix("_s.npy") {
            s.push(stem.to_string());
        }
    }
    f.sort();
    s.sort();
    if let Some(x) = f.iter().find(|x| s.binary_search(x).is_err()) {
        return Err(DataError::format(
            dir,
            format!("`{x}_f.npy` has no `{x}_s.npy`"),
        ));
    }
    if let Some(x) = s.iter().find(|x| f.binary_search(x).is_err()) {
        return Err(DataError::format(
            dir,
            format!("`{x}_s.npy` has no `{x}_f.npy`"),
        ));
    }
    if f.is_empty() {
        return Err(DataError::format(
            dir,
            "no LangSplat `<stem>_f.npy` / `<stem>_s.npy` files",
        ));
    }
    Ok(f)
}

/// Reads and validates the two files of `stem`: `_f` is `[N, D]` and finite; `_s`
/// is `[4, H, W]` with integer values in `-1..N`.
pub fn read_image(dir: &Path, stem: &str) -> Result<LangSplatImage, DataError> {
    let (fp, sp) = image_paths(dir, stem);
    let f = read_npy(&fp)?;
    let &[rows, dim] = f.shape.as_slice() else {
        return Err(DataError::format(
            &fp,
            format!("features have shape {:?}, expected [N, D]", f.shape),
        ));
    };
    if dim == 0 {
        return Err(DataError::format(&fp, "feature dimension is 0"));
    }
    if let Some(i) = f.data.iter().position(|v| !v.is_finite()) {
        return Err(DataError::format(
            &fp,
            format!("row {} has a non-finite value ({})", i / dim, f.data[i]),
        ));
    }
    let s = read_npy(&sp)?;
    let (height, width) = match s.shape.as_slice() {
        &[LEVELS, h, w] if h > 0 && w > 0 && h <= u32::MAX as usize && w <= u32::MAX as usize => {
            (h, w)
        }
        _ => {
            return Err(DataError::format(
                &sp,
                format!("segmentation has shape {:?}, expected [4, H, W]", s.shape),
            ));
        }
    };
    // A row of zeros is no feature (LangSplat's rows are unit CLIP features or codes):
    // refused when a pixel uses it.
    let zero: Vec<bool> = f
        .data
        .chunks_exact(dim)
        .map(|r| r.iter().all(|v| *v == 0.0))
        .collect();
    let mut seg = Vec::with_capacity(s.data.len());
    for (i, &v) in s.data.iter().enumerate() {
        if v >= 0.0 && v < rows as f32 && v.fract() == 0.0 && zero[v as usize] {
            let p = i % (width * height);
            return Err(DataError::format(
                &fp,
                format!(
                    "row {v} is all zeros (no feature), yet pixel (x {}, y {}) of level {} uses it",
                    p % width,
                    p / width,
                    i / (width * height)
                ),
            ));
        }
        if v == -1.0 || (v >= 0.0 && v < rows as f32 && v.fract() == 0.0) {
            seg.push(v as i32);
            continue;
        }
        let (l, p) = (i / (width * height), i % (width * height));
        let at = format!("level {l}, pixel (x {}, y {})", p % width, p / width);
        let why = if v >= 0.0 && v.is_finite() && v.fract() == 0.0 {
            format!("row {v} is out of range (the feature file has {rows} rows)")
        } else {
            format!("value {v} is neither -1 nor an integer row")
        };
        return Err(DataError::format(&sp, format!("{at}: {why}")));
    }
    let (width, height) = (width as u32, height as u32);
    Ok(LangSplatImage {
        stem: stem.to_string(),
        features: f.data,
        dim,
        seg,
        width,
        height,
    })
}

impl LangSplatImage {
    /// Number of feature rows.
    pub fn rows(&self) -> usize {
        self.features.len().checked_div(self.dim).unwrap_or(0)
    }

    /// The segmentation map of `level` (0..4), `[H, W]`.
    pub fn level_map(&self, level: u8) -> &[i32] {
        let n = self.width as usize * self.height as usize;
        let l = (level as usize).min(LEVELS - 1);
        self.seg.get(l * n..(l + 1) * n).unwrap_or_default()
    }

    /// Compact labels at `level`: valid pixels and a local table with only the rows
    /// the level uses (ascending by global row).
    pub fn labels(&self, level: u8) -> Result<ImageLabels, DataError> {
        check_level(level)?;
        let map = self.level_map(level);
        let bad = |p: String| DataError::Labels {
            image: self.stem.clone(),
            problem: p,
        };
        if self.dim == 0 || map.len() != self.width as usize * self.height as usize {
            return Err(bad("segmentation maps do not match the image size".into()));
        }
        let mut local = vec![u32::MAX; self.rows()];
        for &s in map.iter().filter(|&&s| s >= 0) {
            *local
                .get_mut(s as usize)
                .ok_or_else(|| bad(format!("row {s} is out of range")))? = 0;
        }
        let mut features = Vec::new();
        let mut next = 0u32;
        for (row, slot) in local.iter_mut().enumerate() {
            if *slot == 0 {
                *slot = next;
                next += 1;
                features.extend_from_slice(&self.features[row * self.dim..(row + 1) * self.dim]);
            }
        }
        let (mut valid, mut mask) = (Vec::new(), Vec::new());
        for (p, &s) in map.iter().enumerate().filter(|(_, s)| **s >= 0) {
            valid.push(p as u32);
            mask.push(local[s as usize]);
        }
        let (width, height, dim) = (self.width, self.height, self.dim);
        let labels = ImageLabels {
            name: self.stem.clone(),
            width,
            height,
            valid,
            mask,
            features,
            dim,
        };
        labels.validate()?;
        Ok(labels)
    }
}

/// Checks that `level` is 0..=3.
pub(crate) fn check_level(level: u8) -> Result<(), DataError> {
    if level as usize >= LEVELS {
        return Err(DataError::Scene(format!(
            "feature level {level} does not exist (levels are 0..=3; train 1, 2 or 3)"
        )));
    }
    Ok(())
}

/// Checks a set of labels for one level: one feature dimension, and at least one
/// image with a mask.
pub(crate) fn check_level_set(
    source: &Path,
    level: u8,
    labels: &[ImageLabels],
) -> Result<(), DataError> {
    if let Some(first) = labels.first()
        && let Some(l) = labels.iter().find(|l| l.dim != first.dim)
    {
        return Err(DataError::format(
            source,
            format!(
                "image `{}` has feature dimension {}, but `{}` has {}",
                l.name, l.dim, first.name, first.dim
            ),
        ));
    }
    if labels.iter().all(|l| l.valid.is_empty()) {
        return Err(DataError::format(
            source,
            format!(
                "level {level} has no masks in any of the {} images",
                labels.len()
            ),
        ));
    }
    Ok(())
}

/// Loads labels at `level` for the images `names` (camera names, in camera order).
/// Every name needs its files (other images' files are not read); otherwise the error
/// lists the unmatched names.
pub fn load_langsplat_labels(
    dir: &Path,
    level: u8,
    names: &[String],
) -> Result<Vec<ImageLabels>, DataError> {
    check_level(level)?;
    let stems = list_stems(dir)?;
    match_names(dir, names, &stems)?;
    let labels = names
        .iter()
        .map(|n| read_image(dir, n)?.labels(level))
        .collect::<Result<Vec<_>, _>>()?;
    check_level_set(dir, level, &labels)?;
    Ok(labels)
}

/// Checks that every name of `names` (cameras) is among `available` (labelled
/// images). Labelled images without a camera are allowed: the cameras choose which
/// images a run uses (a subset of an orbit, a split), so `synth --subsets` scenes share
/// one dataset. A camera without labels is an error that lists both sides.
pub(crate) fn match_names(
    source: &Path,
    names: &[String],
    available: &[String],
) -> Result<(), DataError> {
    let mut have: Vec<&String> = available.iter().collect();
    have.sort_unstable();
    let mut want: Vec<&String> = names.iter().collect();
    want.sort_unstable();
    let no_labels: Vec<String> = want
        .iter()
        .filter(|n| have.binary_search(n).is_err())
        .map(|n| n.to_string())
        .collect();
    if no_labels.is_empty() {
        return Ok(());
    }
    let no_camera: Vec<String> = have
        .iter()
        .filter(|n| want.binary_search(n).is_err())
        .map(|n| n.to_string())
        .collect();
    Err(DataError::NameMismatch {
        path: source.into(),
        no_labels,
        no_camera,
    })
}

#[cfg(test)]
#[path = "langsplat_tests.rs"]
mod tests;
