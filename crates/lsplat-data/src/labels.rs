//! Per-image labels in the compact form training uses.

use lsplat_core::{Camera, Gaussians};

use crate::DataError;

/// The labels of one image at the trained level, compact: only valid pixels are
/// stored. A dense `[D, H, W]` target is never built.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageLabels {
    /// Image name (file stem); matches [`Camera::name`].
    pub name: String,
    /// Image width.
    pub width: u32,
    /// Image height.
    pub height: u32,
    /// Row-major indices (`y·width + x`) of the pixels that carry a mask, ascending.
    pub valid: Vec<u32>,
    /// For each valid pixel, its row in `features`.
    pub mask: Vec<u32>,
    /// Mask feature table, `[rows, dim]` row-major.
    pub features: Vec<f32>,
    /// Feature dimension D.
    pub dim: usize,
}

impl ImageLabels {
    /// Builds compact labels from a dense segmentation map (`-1` = no mask, otherwise a
    /// row of `features`).
    pub fn from_seg_map(
        name: impl Into<String>,
        (width, height): (u32, u32),
        seg: &[i32],
        features: Vec<f32>,
        dim: usize,
    ) -> Result<ImageLabels, DataError> {
        let name = name.into();
        let bad = |problem: String| DataError::Labels {
            image: name.clone(),
            problem,
        };
        if seg.len() != width as usize * height as usize {
            return Err(bad(format!(
                "segmentation map has {} values, expected {width}x{height}",
                seg.len()
            )));
        }
        let mut valid = Vec::new();
        let mut mask = Vec::new();
        for (p, &s) in seg.iter().enumerate() {
            if s >= 0 {
                valid.push(p as u32);
                mask.push(s as u32);
            } else if s != -1 {
                return Err(bad(format!(
                    "segmentation value {s} at pixel {p} is neither -1 nor a row"
                )));
            }
        }
        let labels = ImageLabels {
            name,
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

    /// Number of rows in the feature table.
    pub fn rows(&self) -> usize {
        self.features.len().checked_div(self.dim).unwrap_or(0)
    }

    /// Fraction of pixels that are valid.
    pub fn valid_fraction(&self) -> f64 {
        self.valid.len() as f64 / (self.width as f64 * self.height as f64).max(1.0)
    }

    /// The dense map (`-1` where invalid); for tests and tools, not for training.
    pub fn seg_map(&self) -> Vec<i32> {
        let mut seg = vec![-1; self.width as usize * self.height as usize];
        for (&p, &m) in self.valid.iter().zip(&self.mask) {
            seg[p as usize] = m as i32;
        }
        seg
    }

    /// Checks shapes, ordering, ranges and finiteness.
    pub fn validate(&self) -> Result<(), DataError> {
        let bad = |problem: String| DataError::Labels {
            image: self.name.clone(),
            problem,
        };
        if self.dim == 0 {
            return Err(bad("feature dimension is 0".into()));
        }
        if !self.features.len().is_multiple_of(self.dim) {
            return Err(bad(format!(
                "feature table of {} values is not a multiple of D = {}",
                self.features.len(),
                self.dim
            )));
        }
        if self.valid.len() != self.mask.len() {
            return Err(bad("valid pixels and mask ids differ in length".into()));
        }
        let n_px = self.width as u64 * self.height as u64;
        if self.valid.windows(2).any(|w| w[0] >= w[1]) {
            return Err(bad("valid pixels are not strictly ascending".into()));
        }
        if let Some(&last) = self.valid.last()
            && last as u64 >= n_px
        {
            return Err(bad(format!(
                "pixel index {last} is outside {}x{}",
                self.width, self.height
            )));
        }
        let rows = self.rows();
        if let Some(&m) = self.mask.iter().find(|&&m| m as usize >= rows) {
            return Err(bad(format!(
                "mask index {m} is out of range (the feature table has {rows} rows)"
            )));
        }
        if let Some(i) = self.features.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!(
                "feature value {} (row {}) is not finite",
                self.features[i],
                i / self.dim
            )));
        }
        Ok(())
    }
}

/// Everything training consumes.
#[derive(Clone, Debug)]
pub struct SceneData {
    /// Frozen geometry.
    pub gaussians: Gaussians,
    /// Cameras, one per image.
    pub cameras: Vec<Camera>,
    /// Labels, aligned with `cameras`.
    pub labels: Vec<ImageLabels>,
}

impl SceneData {
    /// Feature dimension (the same for every image).
    pub fn dim(&self) -> usize {
        self.labels.first().map_or(0, |l| l.dim)
    }

    /// Checks that the parts agree: Gaussians valid, one label set per camera with the
    /// camera's size and name, one feature dimension.
    pub fn validate(&self) -> Result<(), DataError> {
        self.gaussians.validate()?;
        if self.gaussians.is_empty() {
            return Err(DataError::Scene("the scene has no Gaussians".into()));
        }
        if self.cameras.is_empty() {
            return Err(DataError::Scene("the scene has no cameras".into()));
        }
        if self.cameras.len() != self.labels.len() {
            return Err(DataError::Scene(format!(
                "{} cameras but {} label sets",
                self.cameras.len(),
                self.labels.len()
            )));
        }
        let dim = self.dim();
        for (cam, lab) in self.cameras.iter().zip(&self.labels) {
            cam.validate()?;
            lab.validate()?;
            if cam.name != lab.name {
                return Err(DataError::Scene(format!(
                    "camera `{}` is paired with labels of `{}`",
                    cam.name, lab.name
                )));
            }
            if (cam.width, cam.height) != (lab.width, lab.height) {
                return Err(DataError::Labels {
                    image: lab.name.clone(),
                    problem: format!(
                        "labels are {}x{} but the camera is {}x{}",
                        lab.width, lab.height, cam.width, cam.height
                    ),
                });
            }
            if lab.dim != dim {
                return Err(DataError::Labels {
                    image: lab.name.clone(),
                    problem: format!(
                        "feature dimension {} differs from {dim} of the first image",
                        lab.dim
                    ),
                });
            }
        }
        if self.labels.iter().all(|l| l.valid.is_empty()) {
            return Err(DataError::Scene(
                "no image has a valid pixel at this level".into(),
            ));
        }
        Ok(())
    }

    /// Checks the labels of a further level against this scene: one label set per
    /// camera, with its name and size and the scene's feature dimension.
    pub fn validate_level(&self, labels: &[ImageLabels]) -> Result<(), DataError> {
        if labels.len() != self.cameras.len() {
            return Err(DataError::Scene(format!(
                "{} cameras but {} label sets",
                self.cameras.len(),
                labels.len()
            )));
        }
        for (cam, lab) in self.cameras.iter().zip(labels) {
            lab.validate()?;
            if cam.name != lab.name || (cam.width, cam.height) != (lab.width, lab.height) {
                return Err(DataError::Labels {
                    image: lab.name.clone(),
                    problem: format!(
                        "labels `{}` ({}x{}) do not match camera `{}` ({}x{})",
                        lab.name, lab.width, lab.height, cam.name, cam.width, cam.height
                    ),
                });
            }
            if lab.dim != self.dim() {
                return Err(DataError::Labels {
                    image: lab.name.clone(),
                    problem: format!(
                        "feature dimension {} differs from {} of the first level",
                        lab.dim,
                        self.dim()
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seg_map_round_trip_and_errors() {
        let seg = vec![-1, 0, 1, -1, 1, 0];
        let l = ImageLabels::from_seg_map("a", (3, 2), &seg, vec![1.0, 0.0, 0.0, 1.0], 2).unwrap();
        assert_eq!(l.valid, vec![1, 2, 4, 5]);
        assert_eq!(l.mask, vec![0, 1, 1, 0]);
        assert_eq!(l.seg_map(), seg);
        let e = ImageLabels::from_seg_map("a", (3, 2), &[-1, 0, 2, -1, 1, 0], vec![1.0; 4], 2)
            .unwrap_err();
        assert!(
            e.to_string().contains("mask index 2 is out of range"),
            "{e}"
        );
        let e = ImageLabels::from_seg_map("a", (3, 2), &[0; 5], vec![1.0; 4], 2).unwrap_err();
        assert!(e.to_string().contains("5 values"), "{e}");
        let e = ImageLabels::from_seg_map("a", (3, 2), &[-3; 6], vec![1.0; 4], 2).unwrap_err();
        assert!(e.to_string().contains("-3"), "{e}");
        let e =
            ImageLabels::from_seg_map("a", (3, 2), &[0; 6], vec![f32::NAN, 0.0], 2).unwrap_err();
        assert!(e.to_string().contains("not finite"), "{e}");
    }
}
