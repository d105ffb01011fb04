//! nerfstudio / instant-ngp `transforms.json`.
//!
//! Intrinsics (`fl_x`, `fl_y`, `cx`, `cy`, `w`, `h`, or `camera_angle_x`) come from
//! the top level or from each frame (a frame's value wins). `transform_matrix` is
//! camera-to-world in the OpenGL convention (y up, z backwards); it is converted to
//! OpenCV axes by flipping its y and z columns. Distortion (non-zero `k1..k4`,
//! `p1`, `p2`) or a fisheye/equirectangular model is rejected: undistort first.

use std::path::Path;

use glam::{DMat3, DVec3};
use lsplat_core::Camera;
use serde_json::Value;

use super::{check_cameras, image_stem};
use crate::DataError;

/// Reads a `transforms.json`, keeping the order of its frames.
pub fn read_transforms(path: &Path) -> Result<Vec<Camera>, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    parse_transforms(&bytes, path)
}

/// Parses the bytes of a `transforms.json`; `path` only names the file in errors.
pub fn parse_transforms(bytes: &[u8], path: &Path) -> Result<Vec<Camera>, DataError> {
    let bad = |p: String| DataError::format(path, p);
    let root: Value = serde_json::from_slice(bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    let frames = root
        .get("frames")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no `frames` array".into()))?;
    let mut cams = Vec::with_capacity(frames.len());
    for (i, fr) in frames.iter().enumerate() {
        let get = |k: &str| fr.get(k).or_else(|| root.get(k));
        let num = |k: &str| get(k).and_then(Value::as_f64);
        let file = fr
            .get("file_path")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("frame {i}: no `file_path`")))?;
        let name = image_stem(file);
        let model = get("camera_model")
            .and_then(Value::as_str)
            .unwrap_or("OPENCV");
        let distorted = ["k1", "k2", "k3", "k4", "p1", "p2"]
            .iter()
            .any(|k| num(k).is_some_and(|v| v != 0.0));
        if distorted || !matches!(model, "OPENCV" | "PINHOLE" | "SIMPLE_PINHOLE") {
            return Err(DataError::DistortedCamera {
                path: path.into(),
                camera: name,
                model: model.into(),
            });
        }
        let need =
            |k: &str| num(k).ok_or_else(|| bad(format!("frame {i} (`{file}`): no numeric `{k}`")));
        let (w, h) = (need("w")?, need("h")?);
        if !(w >= 1.0 && h >= 1.0 && w <= u32::MAX as f64 && h <= u32::MAX as f64) {
            return Err(bad(format!("frame {i}: image size {w}x{h} is invalid")));
        }
        let fx = match num("fl_x") {
            Some(f) => f,
            None => 0.5 * w / (0.5 * need("camera_angle_x")?).tan(),
        };
        let fy = match (num("fl_y"), num("camera_angle_y")) {
            (Some(f), _) => f,
            (None, Some(a)) => 0.5 * h / (0.5 * a).tan(),
            _ => fx,
        };
        let (cx, cy) = (num("cx").unwrap_or(w / 2.0), num("cy").unwrap_or(h / 2.0));
        let m = fr.get("transform_matrix").and_then(Value::as_array);
        let rows: Option<Vec<[f64; 4]>> = m.map(|m| {
            m.iter()
                .take(3)
                .filter_map(|r| {
                    let r = r.as_array()?;
                    let v: Vec<f64> = r.iter().filter_map(Value::as_f64).collect();
                    (v.len() == 4 && r.len() == 4).then(|| [v[0], v[1], v[2], v[3]])
                })
                .collect()
        });
        let rows = rows.filter(|r| r.len() == 3).ok_or_else(|| {
            bad(format!(
                "frame {i} (`{file}`): `transform_matrix` is not a 4x4 (or 3x4) matrix"
            ))
        })?;
        let col = |j: usize| DVec3::new(rows[0][j], rows[1][j], rows[2][j]);
        // OpenGL → OpenCV: negate the y and z axes of the camera.
        let r = DMat3::from_cols(col(0), -col(1), -col(2));
        cams.push(Camera::from_c2w(
            name,
            (w as u32, h as u32),
            (fx as f32, fy as f32, cx as f32, cy as f32),
            r.as_mat3(),
            col(3).as_vec3(),
        ));
    }
    check_cameras(path, &cams)?;
    Ok(cams)
}
