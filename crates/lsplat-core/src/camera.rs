//! Pinhole cameras.

use glam::{Mat3, Mat4, Vec3};

use crate::CoreError;

/// A pinhole camera (no distortion) with its pose.
///
/// Convention: world to camera is `x_c = R·x_w + t` with OpenCV/COLMAP axes (x right,
/// y down, z forward). A point projects to `u = fx·x/z + cx`, `v = fy·y/z + cy` in
/// continuous pixel coordinates where the centre of pixel `(i, j)` is `(i + 0.5, j + 0.5)`
/// (the COLMAP convention).
#[derive(Clone, Debug, PartialEq)]
pub struct Camera {
    /// Image name (file stem), used to match cameras with images and labels.
    pub name: String,
    /// Image width in pixels.
    pub width: u32,
    /// Image height in pixels.
    pub height: u32,
    /// Focal length along x, pixels.
    pub fx: f32,
    /// Focal length along y, pixels.
    pub fy: f32,
    /// Principal point x, pixels.
    pub cx: f32,
    /// Principal point y, pixels.
    pub cy: f32,
    /// Rotation of world to camera (`R`).
    pub rotation: Mat3,
    /// Translation of world to camera (`t`).
    pub translation: Vec3,
}

impl Camera {
    /// Builds a camera from a camera-to-world rotation and the camera centre.
    pub fn from_c2w(
        name: impl Into<String>,
        (width, height): (u32, u32),
        (fx, fy, cx, cy): (f32, f32, f32, f32),
        r_c2w: Mat3,
        centre: Vec3,
    ) -> Self {
        let rotation = r_c2w.transpose();
        Camera {
            name: name.into(),
            width,
            height,
            fx,
            fy,
            cx,
            cy,
            rotation,
            translation: -(rotation * centre),
        }
    }

    /// A camera at `eye` looking at `target`, with `up` roughly the world up
    /// direction (image y points down, i.e. along `-up`).
    pub fn look_at(
        name: impl Into<String>,
        (width, height): (u32, u32),
        fov_y: f32,
        eye: Vec3,
        target: Vec3,
        up: Vec3,
    ) -> Self {
        let fwd = (target - eye).normalize();
        let right = fwd.cross(up).normalize();
        let down = fwd.cross(right);
        let r_c2w = Mat3::from_cols(right, down, fwd);
        let f = 0.5 * height as f32 / (0.5 * fov_y).tan();
        Camera::from_c2w(
            name,
            (width, height),
            (f, f, 0.5 * width as f32, 0.5 * height as f32),
            r_c2w,
            eye,
        )
    }

    /// The 4×4 world-to-camera matrix.
    pub fn camera_from_world(&self) -> Mat4 {
        let mut m = Mat4::from_mat3(self.rotation);
        m.w_axis = self.translation.extend(1.0);
        m
    }

    /// Camera centre in world coordinates.
    pub fn centre(&self) -> Vec3 {
        -(self.rotation.transpose() * self.translation)
    }

    /// Number of pixels.
    pub fn pixel_count(&self) -> usize {
        self.width as usize * self.height as usize
    }

    /// Scales the intrinsics and the image size for an image downscaled to
    /// `(width, height)` (e.g. `images_4`, or LangSplat's height-1080 rule).
    pub fn rescaled(&self, width: u32, height: u32) -> Camera {
        let sx = width as f32 / self.width as f32;
        let sy = height as f32 / self.height as f32;
        Camera {
            width,
            height,
            fx: self.fx * sx,
            fy: self.fy * sy,
            cx: self.cx * sx,
            cy: self.cy * sy,
            ..self.clone()
        }
    }

    /// Checks sizes, intrinsics and that the rotation is orthonormal.
    pub fn validate(&self) -> Result<(), CoreError> {
        let bad = |problem: String| CoreError::Camera {
            name: self.name.clone(),
            problem,
        };
        if self.width == 0 || self.height == 0 {
            return Err(bad(format!(
                "image size {}x{} is empty",
                self.width, self.height
            )));
        }
        if self.width as u64 * self.height as u64 > u32::MAX as u64 {
            return Err(bad(format!(
                "image size {}x{} exceeds 2^32 pixels, the largest image supported",
                self.width, self.height
            )));
        }
        for (what, v) in [("fx", self.fx), ("fy", self.fy)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(format!("{what} = {v} must be positive and finite")));
            }
        }
        for (what, v) in [("cx", self.cx), ("cy", self.cy)] {
            if !v.is_finite() {
                return Err(bad(format!("{what} = {v} is not finite")));
            }
        }
        if !self.translation.is_finite() || !self.rotation.is_finite() {
            return Err(bad("pose is not finite".into()));
        }
        let rrt = self.rotation * self.rotation.transpose();
        let err = (rrt - Mat3::IDENTITY)
            .to_cols_array()
            .iter()
            .fold(0f32, |a, v| a.max(v.abs()));
        if err > 1e-3 {
            return Err(bad(format!(
                "rotation is not orthonormal (|RRᵀ - I| = {err:.2e})"
            )));
        }
        // An orthonormal matrix of determinant −1 is a reflection: the image would be
        // mirrored (a flipped axis in the file, or a camera from a left-handed tool).
        let det = self.rotation.determinant();
        if det < 0.0 {
            return Err(bad(format!(
                "rotation has determinant {det:.3}: a reflection, not a rotation (a flipped axis)"
            )));
        }
        Ok(())
    }
}

/// The LangSplat / 3DGS loader's resolution rule: images taller than `max_height`
/// are downscaled so that the height becomes `max_height` (sizes truncated);
/// smaller images are unchanged.
pub fn langsplat_resolution(width: u32, height: u32, max_height: u32) -> (u32, u32) {
    if height <= max_height {
        return (width, height);
    }
    let scale = height as f64 / max_height as f64;
    (
        (width as f64 / scale) as u32,
        (height as f64 / scale) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reflection_is_not_a_camera_rotation() {
        let mut cam = Camera::look_at(
            "m",
            (64, 48),
            0.9,
            Vec3::new(0.0, 0.0, -3.0),
            Vec3::ZERO,
            Vec3::Y,
        );
        cam.validate().unwrap();
        cam.rotation = Mat3::from_diagonal(Vec3::new(-1.0, 1.0, 1.0)) * cam.rotation;
        let e = cam.validate().unwrap_err().to_string();
        assert!(e.contains("`m`") && e.contains("determinant -1.000"), "{e}");
    }

    #[test]
    fn look_at_projects_target_to_centre() {
        let cam = Camera::look_at(
            "c",
            (64, 48),
            1.0,
            Vec3::new(3.0, -2.0, 1.0),
            Vec3::ZERO,
            Vec3::Z,
        );
        cam.validate().unwrap();
        let p = cam.rotation * Vec3::ZERO + cam.translation;
        assert!(p.z > 0.0);
        assert!((cam.fx * p.x / p.z).abs() < 1e-4 && (cam.fy * p.y / p.z).abs() < 1e-4);
        assert!((cam.centre() - Vec3::new(3.0, -2.0, 1.0)).length() < 1e-5);
        // World up appears towards the top of the image (negative y).
        let up = cam.rotation * Vec3::new(0.0, 0.0, 0.5) + cam.translation;
        assert!(up.y / up.z < 0.0);
    }

    #[test]
    fn camera_from_world_matches_rotation_translation() {
        let cam = Camera::look_at(
            "c",
            (8, 8),
            0.8,
            Vec3::new(1.0, 2.0, 3.0),
            Vec3::ZERO,
            Vec3::Y,
        );
        let x = Vec3::new(0.3, -0.2, 0.1);
        let a = cam.camera_from_world().transform_point3(x);
        let b = cam.rotation * x + cam.translation;
        assert!((a - b).length() < 1e-6);
    }

    #[test]
    fn resolution_rule() {
        assert_eq!(langsplat_resolution(1920, 1080, 1080), (1920, 1080));
        assert_eq!(langsplat_resolution(3958, 2968, 1080), (1440, 1080));
        assert_eq!(langsplat_resolution(640, 480, 1080), (640, 480));
    }

    #[test]
    fn validate_rejects_bad_intrinsics() {
        let mut cam = Camera::look_at("c", (8, 8), 0.8, Vec3::ONE, Vec3::ZERO, Vec3::Y);
        cam.fx = f32::NAN;
        assert!(cam.validate().unwrap_err().to_string().contains("fx"));
    }
}
