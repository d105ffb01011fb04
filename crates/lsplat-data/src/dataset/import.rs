//! Import of a LangSplat `language_features(_dim3)` folder into a dataset.

use std::path::Path;

use super::write::{DatasetWriter, ImportSummary};
use crate::DataError;
use crate::langsplat::{LEVELS, list_stems, read_image};

/// Converts every `<stem>_f.npy` / `<stem>_s.npy` pair of `source_dir` (sorted by
/// stem) into `features.parquet` and `masks.parquet` in `out_dir`, one image at a
/// time. The files appear only when every image converted; on error nothing is left.
pub fn import_langsplat(source_dir: &Path, out_dir: &Path) -> Result<ImportSummary, DataError> {
    import_langsplat_with_progress(source_dir, out_dir, &mut |_, _| {})
}

/// [`import_langsplat`], calling `progress(images done, images)` before the first
/// image and after each one.
pub fn import_langsplat_with_progress(
    source_dir: &Path,
    out_dir: &Path,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ImportSummary, DataError> {
    let stems = list_stems(source_dir)?;
    let mut writer: Option<(DatasetWriter, String)> = None;
    progress(0, stems.len());
    for (done, stem) in stems.iter().enumerate() {
        let img = read_image(source_dir, stem)?;
        let (w, first) = match &mut writer {
            Some((w, first)) => (w, first.as_str()),
            None => {
                let w = DatasetWriter::create(out_dir, img.dim)?;
                let (w, first) = writer.insert((w, stem.clone()));
                (w, first.as_str())
            }
        };
        let dim = w.dim();
        if img.dim != dim {
            let (fp, _) = crate::langsplat::image_paths(source_dir, stem);
            return Err(DataError::format(
                fp,
                format!(
                    "feature dimension {} differs from {dim} of `{first}`",
                    img.dim
                ),
            ));
        }
        let maps: Vec<&[i32]> = (0..LEVELS as u8).map(|l| img.level_map(l)).collect();
        w.add_image(stem, (img.width, img.height), &img.features, &maps)?;
        progress(done + 1, stems.len());
    }
    match writer {
        Some((w, _)) => w.finish(),
        None => Err(DataError::format(source_dir, "no images")),
    }
}
