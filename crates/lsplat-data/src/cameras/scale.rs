//! Cameras for downscaled image sets (`images_2`, `images_4`, …, LangSplat's rule).

use lsplat_core::Camera;
use lsplat_core::camera::langsplat_resolution;

/// How the images used for training relate to the cameras' native resolution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ImageScale {
    /// The images have the cameras' size.
    Native,
    /// The images were downscaled by this factor (e.g. 4 for `images_4`): the
    /// intrinsics are divided by it exactly and the sizes truncated, as LLFF/COLMAP
    /// downscaled folders are made.
    Factor(f64),
    /// The images have this size: intrinsics scale with the size ratio
    /// ([`Camera::rescaled`]), as 3DGS loaders do.
    Size {
        /// Image width.
        width: u32,
        /// Image height.
        height: u32,
    },
    /// LangSplat's rule: images taller than `max_height` (1080) are resized to that
    /// height (sizes truncated); smaller ones are unchanged.
    LangSplat {
        /// Maximum height (LangSplat uses 1080).
        max_height: u32,
    },
}

impl ImageScale {
    /// The scale of an image folder named like `images_4` (factor 4) or `images`
    /// (native); `None` for other names.
    pub fn from_folder_name(name: &str) -> Option<ImageScale> {
        match name.strip_prefix("images")? {
            "" => Some(ImageScale::Native),
            s => s
                .strip_prefix('_')?
                .parse::<u32>()
                .ok()
                .filter(|&f| f > 0)
                .map(|f| ImageScale::Factor(f as f64)),
        }
    }
}

/// Applies `scale` to one camera.
pub fn scale_camera(cam: &Camera, scale: ImageScale) -> Camera {
    match scale {
        ImageScale::Native => cam.clone(),
        ImageScale::Factor(f) => {
            let inv = (1.0 / f) as f32;
            Camera {
                width: ((cam.width as f64 / f) as u32).max(1),
                height: ((cam.height as f64 / f) as u32).max(1),
                fx: cam.fx * inv,
                fy: cam.fy * inv,
                cx: cam.cx * inv,
                cy: cam.cy * inv,
                ..cam.clone()
            }
        }
        ImageScale::Size { width, height } => cam.rescaled(width, height),
        ImageScale::LangSplat { max_height } => {
            let (w, h) = langsplat_resolution(cam.width, cam.height, max_height);
            if (w, h) == (cam.width, cam.height) {
                cam.clone()
            } else {
                cam.rescaled(w, h)
            }
        }
    }
}

/// Applies `scale` to every camera.
pub fn scale_cameras(cameras: &[Camera], scale: ImageScale) -> Vec<Camera> {
    cameras.iter().map(|c| scale_camera(c, scale)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::Vec3;

    #[test]
    fn scales() {
        let c = Camera::look_at("a", (3958, 2968), 1.0, Vec3::ONE, Vec3::ZERO, Vec3::Z);
        let f = scale_camera(&c, ImageScale::from_folder_name("images_8").unwrap());
        assert_eq!((f.width, f.height), (494, 371));
        assert!((f.fx - c.fx / 8.0).abs() < 1e-4 && (f.cx - 247.375).abs() < 1e-4);
        let l = scale_camera(&c, ImageScale::LangSplat { max_height: 1080 });
        assert_eq!((l.width, l.height), (1440, 1080));
        assert!((l.fy - c.fy * 1080.0 / 2968.0).abs() < 1e-3);
        let s = scale_camera(
            &c,
            ImageScale::Size {
                width: 100,
                height: 75,
            },
        );
        assert_eq!((s.width, s.height, s.rotation), (100, 75, c.rotation));
        assert_eq!(
            ImageScale::from_folder_name("images"),
            Some(ImageScale::Native)
        );
        assert_eq!(ImageScale::from_folder_name("images_x"), None);
        assert_eq!(ImageScale::from_folder_name("images_0"), None);
        assert_eq!(
            scale_cameras(std::slice::from_ref(&c), ImageScale::Native),
            vec![c]
        );
    }
}
