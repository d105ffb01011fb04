//! Quality of rendered features against the targets on valid pixels.

/// Quality of features on the valid pixels of a set of cameras.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EvalReport {
    /// Mean over valid pixels of cos(rendered, target).
    pub mean_cosine: f64,
    /// Mean over cameras of the masked L1 loss (normalised by C·H·W).
    pub mean_l1: f64,
    /// Valid pixels evaluated.
    pub pixels: usize,
    /// Cameras evaluated.
    pub cameras: usize,
}

/// Running sums of an [`EvalReport`].
#[derive(Clone, Copy, Debug, Default)]
pub struct EvalSum {
    cos: f64,
    l1: f64,
    pixels: usize,
    cameras: usize,
}

impl EvalSum {
    /// Adds one camera of `hw` pixels: `rows` yields each valid pixel's rendered
    /// feature and its target (`c` values each).
    pub fn add_camera<'a>(
        &mut self,
        rows: impl Iterator<Item = (&'a [f32], &'a [f32])>,
        c: usize,
        hw: usize,
    ) {
        let mut l1 = 0f64;
        for (f, g) in rows {
            let dot: f64 = f.iter().zip(g).map(|(a, b)| *a as f64 * *b as f64).sum();
            let nf = f.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
            let ng = g.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
            self.cos += dot / (nf * ng).max(1e-12);
            l1 += f
                .iter()
                .zip(g)
                .map(|(a, b)| (*a as f64 - *b as f64).abs())
                .sum::<f64>();
            self.pixels += 1;
        }
        self.l1 += l1 / (c as f64 * hw.max(1) as f64);
        self.cameras += 1;
    }

    /// The report.
    pub fn report(&self) -> EvalReport {
        EvalReport {
            mean_cosine: self.cos / self.pixels.max(1) as f64,
            mean_l1: self.l1 / self.cameras.max(1) as f64,
            pixels: self.pixels,
            cameras: self.cameras,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_and_opposite_features() {
        let f = [1.0f32, 0.0, 0.0, 0.0, 2.0, 0.0];
        let g = [1.0f32, 0.0, 0.0, 0.0, -1.0, 0.0];
        let mut s = EvalSum::default();
        s.add_camera(f.chunks(3).zip(g.chunks(3)), 3, 4);
        let r = s.report();
        assert_eq!((r.pixels, r.cameras), (2, 1));
        assert!((r.mean_cosine - 0.0).abs() < 1e-12);
        assert!((r.mean_l1 - 3.0 / 12.0).abs() < 1e-12);
    }
}
