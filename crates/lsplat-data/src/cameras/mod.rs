//! Camera readers: COLMAP sparse models (binary and text), Inria `cameras.json`,
//! nerfstudio `transforms.json`, gsplat `.npz`; and rescaling for downscaled images.
//!
//! Every reader returns [`Camera`]s named by the image's file stem (the file name up
//! to its first `.`), with unique names and validated intrinsics and poses. Only
//! undistorted pinhole cameras are accepted; anything else asks to undistort first.

pub mod colmap;
pub mod colmap_bin;
pub mod colmap_text;
pub mod gsplat;
pub mod images;
pub mod inria;
pub mod nerfstudio;
pub mod scale;

use std::path::Path;

use lsplat_core::Camera;

use crate::DataError;

pub use colmap::{ColmapCamera, ColmapImage, read_colmap};
pub use colmap_bin::{parse_cameras_bin, parse_images_bin, read_cameras_bin, read_images_bin};
pub use colmap_text::{parse_cameras_txt, parse_images_txt, read_cameras_txt, read_images_txt};
pub use gsplat::read_gsplat_npz_cameras;
pub use images::{image_size, match_image_folder};
pub use inria::{parse_inria_cameras, read_inria_cameras};
pub use nerfstudio::{parse_transforms, read_transforms};
pub use scale::{ImageScale, scale_camera, scale_cameras};

/// The stem of an image path: its file name (after the last `/` or `\`) up to the
/// first `.`; e.g. `images/frame_001.jpg` → `frame_001`.
pub fn image_stem(name: &str) -> String {
    let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
    file.split('.').next().unwrap_or(file).to_string()
}

/// Validates every camera and checks that names are non-empty and unique.
pub(crate) fn check_cameras(path: &Path, cams: &[Camera]) -> Result<(), DataError> {
    if cams.is_empty() {
        return Err(DataError::format(path, "the file holds no cameras"));
    }
    let mut names: Vec<&str> = Vec::with_capacity(cams.len());
    for c in cams {
        c.validate()
            .map_err(|e| DataError::format(path, e.to_string()))?;
        if c.name.is_empty() {
            return Err(DataError::format(path, "a camera has an empty image name"));
        }
        names.push(&c.name);
    }
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(DataError::format(
            path,
            format!("two cameras have the image name `{}`", w[0]),
        ));
    }
    Ok(())
}

/// Reads cameras from `path`, picking the reader by what it finds: a folder with a
/// COLMAP model (or `sparse/0`), `cameras.json` or `transforms.json`; a `.json`
/// file (an array = Inria, an object with `frames` = nerfstudio); an `.npz`.
pub fn load_cameras(path: &Path) -> Result<Vec<Camera>, DataError> {
    if path.is_dir() {
        let has = |f: &str| path.join(f).is_file();
        if has("images.bin") || has("images.txt") || path.join("sparse/0").is_dir() {
            return read_colmap(path);
        }
        if has("cameras.json") {
            return read_inria_cameras(&path.join("cameras.json"));
        }
        if has("transforms.json") {
            return read_transforms(&path.join("transforms.json"));
        }
        return Err(DataError::format(
            path,
            "no camera file found (COLMAP images.bin/images.txt, sparse/0, cameras.json or transforms.json)",
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("npz") => read_gsplat_npz_cameras(path),
        Some("json") if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') => {
            parse_inria_cameras(&bytes, path)
        }
        Some("json") => parse_transforms(&bytes, path),
        _ => Err(DataError::format(
            path,
            "unknown camera file type (expected a folder, .json or .npz)",
        )),
    }
}

#[cfg(test)]
mod tests;
