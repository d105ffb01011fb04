//! Frozen 3D Gaussians as structure-of-arrays.

use crate::CoreError;

/// A set of 3D Gaussians (frozen geometry), one array per attribute.
///
/// Rotations are unit quaternions in `(w, x, y, z)` order; scales are stored as
/// natural logarithms and opacities as logits, exactly as 3DGS trainers write them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gaussians {
    /// Centres in world coordinates.
    pub means: Vec<[f32; 3]>,
    /// Natural log of the per-axis standard deviations.
    pub log_scales: Vec<[f32; 3]>,
    /// Unit quaternions `(w, x, y, z)`.
    pub rotations: Vec<[f32; 4]>,
    /// Opacity logits; opacity = sigmoid(logit).
    pub opacity_logits: Vec<f32>,
}

impl Gaussians {
    /// Number of Gaussians.
    pub fn len(&self) -> usize {
        self.means.len()
    }

    /// True when there are no Gaussians.
    pub fn is_empty(&self) -> bool {
        self.means.is_empty()
    }

    /// Normalises every quaternion in place (trainers store them unnormalised).
    /// A zero quaternion becomes the identity.
    pub fn normalize_rotations(&mut self) {
        for q in &mut self.rotations {
            let n = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt();
            if n > 0.0 && n.is_finite() {
                for c in q.iter_mut() {
                    *c /= n;
                }
            } else {
                *q = [1.0, 0.0, 0.0, 0.0];
            }
        }
    }

    /// Checks that all arrays have the same length and every value is finite.
    pub fn validate(&self) -> Result<(), CoreError> {
        let n = self.len();
        let lens = [
            ("log_scales", self.log_scales.len()),
            ("rotations", self.rotations.len()),
            ("opacity_logits", self.opacity_logits.len()),
        ];
        for (field, got) in lens {
            if got != n {
                return Err(CoreError::GaussianLength {
                    field,
                    got,
                    expected: n,
                });
            }
        }
        let check = |field: &'static str, index: usize, vals: &[f32]| {
            for &value in vals {
                if !value.is_finite() {
                    return Err(CoreError::NonFinite {
                        field,
                        index,
                        value,
                    });
                }
            }
            Ok(())
        };
        for i in 0..n {
            check("means", i, &self.means[i])?;
            check("log_scales", i, &self.log_scales[i])?;
            check("rotations", i, &self.rotations[i])?;
            check("opacity_logits", i, &[self.opacity_logits[i]])?;
        }
        Ok(())
    }

    /// Opacity of Gaussian `i` (sigmoid of the stored logit).
    pub fn opacity(&self, i: usize) -> f32 {
        sigmoid(self.opacity_logits[i])
    }

    /// Axis-aligned bounds of the centres, `(min, max)`; `None` when empty.
    pub fn bounds(&self) -> Option<([f32; 3], [f32; 3])> {
        let first = *self.means.first()?;
        let mut lo = first;
        let mut hi = first;
        for m in &self.means {
            for k in 0..3 {
                lo[k] = lo[k].min(m[k]);
                hi[k] = hi[k].max(m[k]);
            }
        }
        Some((lo, hi))
    }
}

/// Σ = R·S·Sᵀ·Rᵀ for quaternion `(w, x, y, z)` and log-scales (upper triangle, f64). Shared by
/// the CPU backend and the GPU backend (which rounds it to f32 for upload).
pub fn covariance(q: &[f32; 4], log_scale: &[f32; 3]) -> [f64; 6] {
    let [w, x, y, z] = q.map(f64::from);
    let r = [
        [
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y - w * z),
            2.0 * (x * z + w * y),
        ],
        [
            2.0 * (x * y + w * z),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (y * z - w * x),
        ],
        [
            2.0 * (x * z - w * y),
            2.0 * (y * z + w * x),
            1.0 - 2.0 * (x * x + y * y),
        ],
    ];
    let s = log_scale.map(|v| f64::from(v).exp());
    // M = R·S, Σ = M·Mᵀ.
    let m = |i: usize, k: usize| r[i][k] * s[k];
    let e = |i: usize, j: usize| (0..3).map(|k| m(i, k) * m(j, k)).sum::<f64>();
    [e(0, 0), e(0, 1), e(0, 2), e(1, 1), e(1, 2), e(2, 2)]
}

/// The logistic function.
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Inverse of [`sigmoid`], clamped to ±40 at 0 and 1.
pub fn logit(p: f32) -> f32 {
    if p <= 0.0 {
        -40.0
    } else if p >= 1.0 {
        40.0
    } else {
        (p / (1.0 - p)).ln().clamp(-40.0, 40.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one() -> Gaussians {
        Gaussians {
            means: vec![[0.0, 1.0, 2.0]],
            log_scales: vec![[0.0; 3]],
            rotations: vec![[2.0, 0.0, 0.0, 0.0]],
            opacity_logits: vec![0.0],
        }
    }

    #[test]
    fn normalises_quaternions() {
        let mut g = one();
        g.rotations.push([0.0; 4]);
        g.means.push([0.0; 3]);
        g.log_scales.push([0.0; 3]);
        g.opacity_logits.push(1.0);
        g.normalize_rotations();
        assert_eq!(
            g.rotations,
            vec![[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
        );
    }

    #[test]
    fn validate_reports_nan_and_lengths() {
        let mut g = one();
        assert!(g.validate().is_ok());
        g.means[0][1] = f32::NAN;
        let e = g.validate().unwrap_err().to_string();
        assert!(e.contains("means") && e.contains("gaussian 0"), "{e}");
        let mut g = one();
        g.opacity_logits.clear();
        assert!(
            g.validate()
                .unwrap_err()
                .to_string()
                .contains("opacity_logits")
        );
    }

    #[test]
    fn logit_inverts_sigmoid() {
        for p in [0.01f32, 0.3, 0.5, 0.9] {
            assert!((sigmoid(logit(p)) - p).abs() < 1e-6);
        }
        assert_eq!(logit(0.0), -40.0);
        assert_eq!(logit(1.0), 40.0);
    }
}
