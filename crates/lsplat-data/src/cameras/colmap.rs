//! COLMAP sparse models: camera models, cameras, images, and their conversion to
//! [`Camera`]s. The binary and text codecs are in `colmap_bin` and `colmap_text`.

use std::path::{Path, PathBuf};

use glam::{DMat3, DQuat, DVec3};
use lsplat_core::Camera;

use super::{check_cameras, image_stem};
use crate::DataError;

/// COLMAP camera models, with their ids and parameter counts.
pub const CAMERA_MODELS: [(&str, usize); 12] = [
    ("SIMPLE_PINHOLE", 3),
    ("PINHOLE", 4),
    ("SIMPLE_RADIAL", 4),
    ("RADIAL", 5),
    ("OPENCV", 8),
    ("OPENCV_FISHEYE", 8),
    ("FULL_OPENCV", 12),
    ("FOV", 5),
    ("SIMPLE_RADIAL_FISHEYE", 4),
    ("RADIAL_FISHEYE", 5),
    ("THIN_PRISM_FISHEYE", 12),
    ("RAD_TAN_THIN_PRISM_FISHEYE", 16),
];

/// A camera (intrinsics) of a COLMAP model.
#[derive(Clone, Debug, PartialEq)]
pub struct ColmapCamera {
    /// Camera id.
    pub id: u32,
    /// Model id (index into [`CAMERA_MODELS`]).
    pub model: u32,
    /// Image width.
    pub width: u32,
    /// Image height.
    pub height: u32,
    /// Model parameters, as many as the model has.
    pub params: Vec<f64>,
}

impl ColmapCamera {
    /// Name of the model, e.g. `PINHOLE`.
    pub fn model_name(&self) -> &'static str {
        CAMERA_MODELS
            .get(self.model as usize)
            .map_or("UNKNOWN", |m| m.0)
    }

    /// Pinhole intrinsics `(fx, fy, cx, cy)`; distorted models are an error that asks
    /// to undistort first. `path` names the model in errors.
    pub fn pinhole(&self, path: &Path) -> Result<(f64, f64, f64, f64), DataError> {
        match (self.model, self.params.as_slice()) {
            (0, &[f, cx, cy]) => Ok((f, f, cx, cy)),
            (1, &[fx, fy, cx, cy]) => Ok((fx, fy, cx, cy)),
            (0 | 1, p) => Err(DataError::format(
                path,
                format!(
                    "camera {} has {} parameters for {}",
                    self.id,
                    p.len(),
                    self.model_name()
                ),
            )),
            _ => Err(DataError::DistortedCamera {
                path: path.into(),
                camera: self.id.to_string(),
                model: self.model_name().into(),
            }),
        }
    }
}

/// An image (pose) of a COLMAP model.
#[derive(Clone, Debug, PartialEq)]
pub struct ColmapImage {
    /// Image id.
    pub id: u32,
    /// World-to-camera rotation as a quaternion `(w, x, y, z)`.
    pub qvec: [f64; 4],
    /// World-to-camera translation.
    pub tvec: [f64; 3],
    /// Id of its camera.
    pub camera_id: u32,
    /// Image file name (may contain folders).
    pub name: String,
}

/// Converts a COLMAP model to cameras, sorted by name (as 3DGS does). Every image
/// must reference a pinhole camera; names (stems) must be unique.
pub fn to_cameras(
    path: &Path,
    cameras: &[ColmapCamera],
    images: &[ColmapImage],
) -> Result<Vec<Camera>, DataError> {
    let mut out = Vec::with_capacity(images.len());
    for im in images {
        let cam = cameras
            .iter()
            .find(|c| c.id == im.camera_id)
            .ok_or_else(|| {
                DataError::format(
                    path,
                    format!(
                        "image `{}` references camera {}, which does not exist",
                        im.name, im.camera_id
                    ),
                )
            })?;
        let (fx, fy, cx, cy) = cam.pinhole(path)?;
        let [w, x, y, z] = im.qvec;
        let q = DQuat::from_xyzw(x, y, z, w);
        let n = q.length();
        if !(n.is_finite() && n > 1e-12) {
            return Err(DataError::format(
                path,
                format!("image `{}` has a degenerate quaternion", im.name),
            ));
        }
        let r = DMat3::from_quat(q / n);
        let t = DVec3::from_array(im.tvec);
        out.push(Camera {
            name: image_stem(&im.name),
            width: cam.width,
            height: cam.height,
            fx: fx as f32,
            fy: fy as f32,
            cx: cx as f32,
            cy: cy as f32,
            rotation: r.as_mat3(),
            translation: t.as_vec3(),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    check_cameras(path, &out)?;
    Ok(out)
}

/// Reads a COLMAP sparse model folder (`cameras.bin` + `images.bin`, or
/// `cameras.txt` + `images.txt`) as cameras sorted by name. `dir` may also be a scene
/// folder holding `sparse/0`.
pub fn read_colmap(dir: &Path) -> Result<Vec<Camera>, DataError> {
    let dir: PathBuf = if dir.join("sparse/0").is_dir() {
        dir.join("sparse/0")
    } else {
        dir.to_path_buf()
    };
    let (cams, imgs) = if dir.join("images.bin").is_file() {
        let cams = super::colmap_bin::read_cameras_bin(&dir.join("cameras.bin"))?;
        (
            cams,
            super::colmap_bin::read_images_bin(&dir.join("images.bin"))?,
        )
    } else if dir.join("images.txt").is_file() {
        let cams = super::colmap_text::read_cameras_txt(&dir.join("cameras.txt"))?;
        (
            cams,
            super::colmap_text::read_images_txt(&dir.join("images.txt"))?,
        )
    } else {
        return Err(DataError::format(
            &dir,
            "no images.bin or images.txt: the COLMAP model has no poses",
        ));
    };
    to_cameras(&dir, &cams, &imgs)
}

/// The world-to-camera pose of `cam` as a COLMAP quaternion `(w, x, y, z)` (with
/// `w ≥ 0`) and translation; for writers and tests.
pub fn pose_of(cam: &Camera) -> ([f64; 4], [f64; 3]) {
    let q = DQuat::from_mat3(&cam.rotation.as_dmat3()).normalize();
    let q = if q.w < 0.0 { -q } else { q };
    ([q.w, q.x, q.y, q.z], cam.translation.as_dvec3().to_array())
}
