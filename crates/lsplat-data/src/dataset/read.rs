//! Streaming dataset reader: builds compact [`ImageLabels`] for one or more levels.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::Path;

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::rle::Runs;
use super::schema::{Columns, FEATURES_FILE, MASKS_FILE, feature_row, list_row};
use crate::langsplat::{check_level, check_level_set, match_names};
use crate::{DataError, ImageLabels};

/// Calls `f` on every record batch of the Parquet file at `path`, streaming; returns
/// the file's `lsplat.dim` metadata, if any.
fn for_each_batch(
    path: &Path,
    mut f: impl FnMut(&RecordBatch) -> Result<(), DataError>,
) -> Result<Option<String>, DataError> {
    let file = File::open(path).map_err(|e| DataError::io(path, e))?;
    let err = |e: String| DataError::format(path, format!("not a readable Parquet file: {e}"));
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| err(e.to_string()))?;
    let dim = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == "lsplat.dim"))
        .and_then(|k| k.value.clone());
    let reader = builder
        .with_batch_size(4096)
        .build()
        .map_err(|e| err(e.to_string()))?;
    for batch in reader {
        f(&batch.map_err(|e| err(e.to_string()))?)?;
    }
    Ok(dim)
}

/// Checks a file's `lsplat.dim` metadata against the feature width `dim`.
fn check_dim_metadata(path: &Path, meta: Option<String>, dim: usize) -> Result<(), DataError> {
    match meta {
        Some(m) if m.trim().parse::<usize>().ok() != Some(dim) => Err(DataError::format(
            path,
            format!(
                "metadata `lsplat.dim` = `{m}` disagrees with the feature width {dim} of features.parquet"
            ),
        )),
        _ => Ok(()),
    }
}

/// One image being assembled: sorted distinct mask ids, runs, and the table.
struct Pending {
    height: u32,
    width: u32,
    runs: Runs,
    ids: Vec<u32>,
    table: Vec<f32>,
    filled: Vec<bool>,
}

/// Loads the labels of `level` from a dataset folder for the images `names` (camera
/// names, in camera order). The images at that level and `names` must match one to
/// one; a level without masks in every image, differing dimensions, broken runs or
/// missing feature rows are errors naming the file.
pub fn load_dataset_labels(
    dataset_dir: &Path,
    level: u8,
    names: &[String],
) -> Result<Vec<ImageLabels>, DataError> {
    let mut levels = load_dataset_levels(dataset_dir, &[level], names)?;
    Ok(levels.pop().unwrap_or_default())
}

/// Loads the labels of several levels (`[level][camera]`, in the order of `levels`)
/// in one pass over each file, with the checks of [`load_dataset_labels`] per level.
pub fn load_dataset_levels(
    dataset_dir: &Path,
    levels: &[u8],
    names: &[String],
) -> Result<Vec<Vec<ImageLabels>>, DataError> {
    for &level in levels {
        check_level(level)?;
    }
    let mp = dataset_dir.join(MASKS_FILE);
    // Per image, one slot per entry of `levels`.
    let mut pending: HashMap<String, Vec<Option<Pending>>> = HashMap::new();
    let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
    let mut seen: Vec<Vec<String>> = vec![Vec::new(); levels.len()];
    let mut seen_set: HashSet<(String, usize)> = HashSet::new();
    let masks_dim = for_each_batch(&mp, |b| {
        let c = Columns {
            batch: b,
            path: &mp,
        };
        let (img, lv, h, w, n_masks) = (
            c.str("image")?,
            c.u8("level")?,
            c.u32("height")?,
            c.u32("width")?,
            c.u32("masks")?,
        );
        let (st, ln, mk) = (
            c.u32_list("run_start")?,
            c.u32_list("run_length")?,
            c.u32_list("run_mask")?,
        );
        for i in 0..b.num_rows() {
            let Some(li) = levels.iter().position(|&l| l == lv.value(i)) else {
                continue;
            };
            let level = levels[li];
            let name = img.value(i).to_string();
            let runs = Runs {
                starts: list_row(st, i),
                lengths: list_row(ln, i),
                masks: list_row(mk, i),
            };
            let (height, width) = (h.value(i), w.value(i));
            let bad =
                |p: String| DataError::format(&mp, format!("image `{name}`, level {level}: {p}"));
            let n_px = height as u64 * width as u64;
            if n_px > u32::MAX as u64 {
                return Err(bad(format!("image size {width}x{height} is too large")));
            }
            runs.check(n_px).map_err(bad)?;
            if wanted.contains(name.as_str()) {
                // What training this image holds, from the header: its labels (8 B per
                // valid pixel) and, at its first visit, a pixel lookup (4 B per pixel).
                lsplat_core::memory::check_fits(
                    &format!(
                        "{}: image `{name}` ({width}x{height}, {} labelled pixels)",
                        mp.display(),
                        runs.pixels()
                    ),
                    4 * n_px + 8 * runs.pixels(),
                    1,
                )?;
            }
            if !seen_set.insert((name.clone(), li)) {
                return Err(bad("appears twice".into()));
            }
            seen[li].push(name.clone());
            if wanted.contains(name.as_str()) {
                let mut ids = runs.masks.clone();
                ids.sort_unstable();
                ids.dedup();
                if ids.len() != n_masks.value(i) as usize {
                    return Err(bad(format!(
                        "the `masks` column says {} masks but the runs use {}",
                        n_masks.value(i),
                        ids.len()
                    )));
                }
                let filled = vec![false; ids.len()];
                pending.entry(name).or_insert_with(|| {
                    std::iter::repeat_with(|| None).take(levels.len()).collect()
                })[li] = Some(Pending {
                    height,
                    width,
                    runs,
                    ids,
                    table: Vec::new(),
                    filled,
                });
            }
        }
        Ok(())
    })?;
    for seen in &seen {
        match_names(&mp, names, seen)?;
    }
    let fp = dataset_dir.join(FEATURES_FILE);
    let mut dim = 0;
    let features_dim = for_each_batch(&fp, |b| {
        let c = Columns {
            batch: b,
            path: &fp,
        };
        let (img, ids, (feat, d)) = (c.str("image")?, c.u32("mask_id")?, c.features("feature")?);
        dim = d;
        for i in 0..b.num_rows() {
            let Some(slots) = pending.get_mut(img.value(i)) else {
                continue;
            };
            for p in slots.iter_mut().flatten() {
                let Ok(k) = p.ids.binary_search(&ids.value(i)) else {
                    continue;
                };
                if std::mem::replace(&mut p.filled[k], true) {
                    return Err(DataError::format(
                        &fp,
                        format!(
                            "image `{}`: mask {} appears twice",
                            img.value(i),
                            ids.value(i)
                        ),
                    ));
                }
                if p.table.is_empty() {
                    p.table = vec![0.0; p.ids.len() * d];
                }
                let row = feature_row(feat, i);
                if let (Some(dst), true) = (p.table.get_mut(k * d..(k + 1) * d), row.len() == d) {
                    dst.copy_from_slice(&row);
                }
            }
        }
        Ok(())
    })?;
    if dim > 0 {
        check_dim_metadata(&fp, features_dim, dim)?;
        check_dim_metadata(&mp, masks_dim, dim)?;
    }
    let mut out = Vec::with_capacity(levels.len());
    for (li, &level) in levels.iter().enumerate() {
        let mut labels_of_level = Vec::with_capacity(names.len());
        for name in names {
            let p = pending
                .get_mut(name)
                .and_then(|slots| slots[li].take())
                .ok_or_else(|| {
                    DataError::format(&mp, format!("image `{name}` appears twice in the names"))
                })?;
            if let Some(k) = p.filled.iter().position(|f| !f) {
                return Err(DataError::format(
                    &fp,
                    format!(
                        "image `{name}`: mask {} (level {level}) has no feature row",
                        p.ids[k]
                    ),
                ));
            }
            let (mut valid, mut mask) = (Vec::new(), Vec::new());
            p.runs.expand(&mut valid, &mut mask);
            for m in &mut mask {
                *m = p.ids.binary_search(m).unwrap_or(0) as u32;
            }
            let labels = ImageLabels {
                name: name.clone(),
                width: p.width,
                height: p.height,
                valid,
                mask,
                features: p.table,
                dim: dim.max(1),
            };
            labels.validate()?;
            labels_of_level.push(labels);
        }
        check_level_set(dataset_dir, level, &labels_of_level)?;
        out.push(labels_of_level);
    }
    Ok(out)
}
