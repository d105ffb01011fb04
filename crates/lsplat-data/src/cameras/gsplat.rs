//! gsplat's test scene archive (`test_garden.npz`): `viewmats [C,4,4]`
//! (world-to-camera, OpenCV axes), `Ks [C,3,3]`, `width`, `height`.

use std::path::Path;

use glam::{Mat3, Vec3};
use lsplat_core::Camera;

use super::check_cameras;
use crate::DataError;
use crate::npy::NpyArray;

/// Reads the cameras of a gsplat-style `.npz`; they are named `0000`, `0001`, ….
pub fn read_gsplat_npz_cameras(path: &Path) -> Result<Vec<Camera>, DataError> {
    let arrays = crate::npz::read_npz(path)?;
    let get = |k: &str| -> Result<&NpyArray, DataError> {
        arrays
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, a)| a)
            .ok_or_else(|| DataError::format(path, format!("no `{k}` array")))
    };
    let (views, ks) = (get("viewmats")?, get("Ks")?);
    let c = views.shape.first().copied().unwrap_or(0);
    if views.shape != [c, 4, 4] || ks.shape != [c, 3, 3] {
        return Err(DataError::format(
            path,
            format!(
                "viewmats {:?} and Ks {:?} are not [C,4,4] and [C,3,3]",
                views.shape, ks.shape
            ),
        ));
    }
    let size = |k: &str| -> Result<u32, DataError> {
        match get(k)?.data.as_slice() {
            [v] if *v >= 1.0 && *v <= u32::MAX as f32 => Ok(*v as u32),
            _ => Err(DataError::format(
                path,
                format!("`{k}` is not a positive scalar"),
            )),
        }
    };
    let (width, height) = (size("width")?, size("height")?);
    let cams: Vec<Camera> = (0..c)
        .map(|i| {
            let v = &views.data[i * 16..i * 16 + 16];
            let k = &ks.data[i * 9..i * 9 + 9];
            Camera {
                name: format!("{i:04}"),
                width,
                height,
                fx: k[0],
                fy: k[4],
                cx: k[2],
                cy: k[5],
                rotation: Mat3::from_cols_array(&[
                    v[0], v[4], v[8], v[1], v[5], v[9], v[2], v[6], v[10],
                ]),
                translation: Vec3::new(v[3], v[7], v[11]),
            }
        })
        .collect();
    check_cameras(path, &cams)?;
    Ok(cams)
}
