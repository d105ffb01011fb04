//! Inria 3DGS `cameras.json` (written by the trainer next to the point cloud).
//!
//! Each entry holds `img_name`, `width`, `height`, `position` (the camera centre in
//! world coordinates), `rotation` (camera-to-world, rows) and `fx`, `fy`. The
//! principal point is not stored; it is the image centre.

use std::path::Path;

use glam::{DMat3, DVec3};
use lsplat_core::Camera;
use serde::Deserialize;

use super::{check_cameras, image_stem};
use crate::DataError;

#[derive(Deserialize)]
struct Entry {
    img_name: String,
    width: u32,
    height: u32,
    position: [f64; 3],
    rotation: [[f64; 3]; 3],
    fx: f64,
    fy: f64,
}

/// Reads an Inria `cameras.json`, keeping its order.
pub fn read_inria_cameras(path: &Path) -> Result<Vec<Camera>, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    parse_inria_cameras(&bytes, path)
}

/// Parses the bytes of an Inria `cameras.json`; `path` only names the file in errors.
pub fn parse_inria_cameras(bytes: &[u8], path: &Path) -> Result<Vec<Camera>, DataError> {
    let entries: Vec<Entry> = serde_json::from_slice(bytes)
        .map_err(|e| DataError::format(path, format!("not an Inria cameras.json: {e}")))?;
    let cams: Vec<Camera> = entries
        .into_iter()
        .map(|e| {
            let r = DMat3::from_cols_array_2d(&e.rotation).transpose();
            Camera::from_c2w(
                image_stem(&e.img_name),
                (e.width, e.height),
                (
                    e.fx as f32,
                    e.fy as f32,
                    e.width as f32 / 2.0,
                    e.height as f32 / 2.0,
                ),
                r.as_mat3(),
                DVec3::from_array(e.position).as_vec3(),
            )
        })
        .collect();
    check_cameras(path, &cams)?;
    Ok(cams)
}
