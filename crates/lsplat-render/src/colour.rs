//! The splats' own colours: spherical harmonics (SH) of degree 0–3 evaluated per
//! Gaussian for a camera centre, as the 3DGS trainer does before compositing:
//! `rgb = max(Σ_k c_k·Y_k(d) + 0.5, 0)` with `d` the unit direction from the camera
//! centre to the Gaussian's mean, and the real SH basis `Y_k` in the trainer's order
//! (index `l² + l + m`, Condon–Shortley phase). Compositing the colours is an ordinary
//! 3-channel `rasterize`, on any backend.

/// `Y_0^0 = 1/(2√π)`.
const C0: f32 = 0.282_094_791_773_878_14_f64 as f32;
/// The degree-1 factor `√(3/4π)`.
const C1: f32 = 0.488_602_511_902_919_9_f64 as f32;
/// Degree-2 factors.
const C2: [f32; 5] = [
    1.092_548_430_592_079_2_f64 as f32,
    -1.092_548_430_592_079_2_f64 as f32,
    0.315_391_565_252_520_05_f64 as f32,
    -1.092_548_430_592_079_2_f64 as f32,
    0.546_274_215_296_039_6_f64 as f32,
];
/// Degree-3 factors.
const C3: [f32; 7] = [
    -0.590_043_589_926_643_5_f64 as f32,
    2.890_611_442_640_554_f64 as f32,
    -0.457_045_799_464_465_8_f64 as f32,
    0.373_176_332_590_115_4_f64 as f32,
    -0.457_045_799_464_465_8_f64 as f32,
    1.445_305_721_320_277_f64 as f32,
    -0.590_043_589_926_643_5_f64 as f32,
];

/// The basis factors in the order device code takes them: `C0`, `C1`, the five of
/// degree 2, the seven of degree 3.
pub const SH_FACTORS: [f32; 14] = [
    C0, C1, C2[0], C2[1], C2[2], C2[3], C2[4], C3[0], C3[1], C3[2], C3[3], C3[4], C3[5], C3[6],
];

/// The highest degree evaluated (a degree-4 file's extra coefficients are ignored).
pub const MAX_DEGREE: u32 = 3;

/// A splat's colour coefficients, as an Inria PLY stores them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShColours {
    /// Degree of `rest` (0–4; evaluated up to [`MAX_DEGREE`]).
    pub degree: u32,
    /// `f_dc_0..2` per Gaussian.
    pub dc: Vec<[f32; 3]>,
    /// `f_rest_*` per Gaussian, `[N, 3·((degree+1)² − 1)]`, channel-major within a row
    /// (all of red's coefficients, then green's, then blue's), as the file holds them.
    pub rest: Vec<f32>,
}

impl ShColours {
    /// Number of Gaussians.
    pub fn len(&self) -> usize {
        self.dc.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.dc.is_empty()
    }

    /// Coefficients per channel in `rest` (`(degree+1)² − 1`).
    pub fn rest_per_channel(&self) -> usize {
        (self.degree as usize + 1).pow(2) - 1
    }

    /// True when colours do not depend on the viewpoint (degree 0).
    pub fn view_independent(&self) -> bool {
        self.degree == 0 || self.rest_per_channel() == 0
    }

    /// Writes every Gaussian's colour seen from `eye` as `[r, g, b, 1]` rows into `out`
    /// (`[N, 4]`; the ones composite to the pixel's opacity). `means` are the Gaussians'
    /// centres. Split over `threads` scoped threads (the result does not depend on it).
    pub fn colours_into(&self, means: &[[f32; 3]], eye: [f32; 3], threads: usize, out: &mut [f32]) {
        let n = self.len().min(means.len());
        let per = n.div_ceil(threads.max(1)).max(4096);
        let k = self.rest_per_channel();
        std::thread::scope(|s| {
            for (chunk, rows) in out[..n * 4].chunks_mut(per * 4).enumerate() {
                let g0 = chunk * per;
                s.spawn(move || {
                    for (i, row) in rows.chunks_exact_mut(4).enumerate() {
                        let g = g0 + i;
                        let rest = &self.rest[g * 3 * k..(g + 1) * 3 * k];
                        let rgb = eval(self.degree, self.dc[g], rest, direction(means[g], eye));
                        row[..3].copy_from_slice(&rgb);
                        row[3] = 1.0;
                    }
                });
            }
        });
    }
}

/// The unit direction from `eye` to `mean` (zero when they coincide).
#[inline]
pub fn direction(mean: [f32; 3], eye: [f32; 3]) -> [f32; 3] {
    let d = [mean[0] - eye[0], mean[1] - eye[1], mean[2] - eye[2]];
    let n = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
    if n > 0.0 {
        [d[0] / n, d[1] / n, d[2] / n]
    } else {
        [0.0; 3]
    }
}

/// One Gaussian's colour in direction `d` (unit): `max(Σ c_k·Y_k(d) + 0.5, 0)` per
/// channel. `rest` holds `(degree+1)² − 1` coefficients per channel, channel-major.
#[inline]
pub fn eval(degree: u32, dc: [f32; 3], rest: &[f32], d: [f32; 3]) -> [f32; 3] {
    let k = rest.len() / 3;
    let mut basis = [0f32; 15];
    let deg = degree.min(MAX_DEGREE);
    let [x, y, z] = d;
    if deg >= 1 {
        basis[0] = -C1 * y;
        basis[1] = C1 * z;
        basis[2] = -C1 * x;
    }
    if deg >= 2 {
        let (xx, yy, zz) = (x * x, y * y, z * z);
        basis[3] = C2[0] * x * y;
        basis[4] = C2[1] * y * z;
        basis[5] = C2[2] * (2.0 * zz - xx - yy);
        basis[6] = C2[3] * x * z;
        basis[7] = C2[4] * (xx - yy);
        if deg >= 3 {
            basis[8] = C3[0] * y * (3.0 * xx - yy);
            basis[9] = C3[1] * x * y * z;
            basis[10] = C3[2] * y * (4.0 * zz - xx - yy);
            basis[11] = C3[3] * z * (2.0 * zz - 3.0 * xx - 3.0 * yy);
            basis[12] = C3[4] * x * (4.0 * zz - xx - yy);
            basis[13] = C3[5] * z * (xx - yy);
            basis[14] = C3[6] * x * (xx - 3.0 * yy);
        }
    }
    let used = ((deg as usize + 1).pow(2) - 1).min(k);
    let mut out = [0f32; 3];
    for (ch, o) in out.iter_mut().enumerate() {
        let coef = &rest[ch * k..ch * k + used];
        let mut v = C0 * dc[ch];
        for (b, c) in basis[..used].iter().zip(coef) {
            v += b * c;
        }
        *o = (v + 0.5).max(0.0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsplat_core::Rng;

    /// The real SH basis from its definition, in float64: associated Legendre
    /// functions (with the Condon–Shortley phase) by their recurrence, normalised by
    /// `√((2l+1)/4π · (l−|m|)!/(l+|m|)!)`, `√2·cos(mφ)` for m > 0, `√2·sin(|m|φ)` for
    /// m < 0.
    fn real_sh(l: i32, m: i32, d: [f64; 3]) -> f64 {
        let ct = d[2];
        let phi = d[1].atan2(d[0]);
        let am = m.abs();
        // P_am^am(x) = (−1)^am (2am−1)!! (1−x²)^{am/2}, then the l recurrence.
        let st = (1.0 - ct * ct).max(0.0).sqrt();
        let mut pmm = 1.0;
        for i in 1..=am {
            pmm *= -((2 * i - 1) as f64) * st;
        }
        let p = if l == am {
            pmm
        } else {
            let mut p1 = ct * (2 * am + 1) as f64 * pmm;
            let mut p0 = pmm;
            for ll in am + 2..=l {
                let p2 =
                    ((2 * ll - 1) as f64 * ct * p1 - (ll + am - 1) as f64 * p0) / (ll - am) as f64;
                p0 = p1;
                p1 = p2;
            }
            p1
        };
        let fact = |n: i32| (1..=n).map(f64::from).product::<f64>();
        let k = ((2 * l + 1) as f64 / (4.0 * std::f64::consts::PI) * fact(l - am) / fact(l + am))
            .sqrt();
        match m.cmp(&0) {
            std::cmp::Ordering::Equal => k * p,
            std::cmp::Ordering::Greater => 2f64.sqrt() * k * (am as f64 * phi).cos() * p,
            std::cmp::Ordering::Less => 2f64.sqrt() * k * (am as f64 * phi).sin() * p,
        }
    }

    #[test]
    fn matches_the_float64_definition_for_every_degree() {
        let mut rng = Rng::new(7);
        for degree in 0..=3u32 {
            let k = ((degree + 1) * (degree + 1) - 1) as usize;
            for _ in 0..200 {
                let dc = [rng.normal(), rng.normal(), rng.normal()];
                let rest: Vec<f32> = (0..3 * k).map(|_| 0.5 * rng.normal()).collect();
                let d = direction([rng.normal(), rng.normal(), rng.normal()], [0.0; 3]);
                let got = eval(degree, dc, &rest, d);
                let dd = d.map(f64::from);
                for ch in 0..3 {
                    let mut want = dc[ch] as f64 * real_sh(0, 0, dd);
                    for l in 1..=degree as i32 {
                        for m in -l..=l {
                            let idx = (l * l + l + m) as usize - 1;
                            want += rest[ch * k + idx] as f64 * real_sh(l, m, dd);
                        }
                    }
                    let want = (want + 0.5).max(0.0);
                    assert!(
                        (got[ch] as f64 - want).abs() < 2e-6 * (1.0 + want.abs()),
                        "degree {degree} channel {ch}: {} vs {want}",
                        got[ch]
                    );
                }
            }
        }
    }

    #[test]
    fn colours_rows_end_in_one_and_degree_four_uses_three() {
        let mut rng = Rng::new(3);
        let n = 9000;
        let means: Vec<[f32; 3]> = (0..n).map(|_| [rng.normal(), rng.normal(), 5.0]).collect();
        let sh = ShColours {
            degree: 4,
            dc: (0..n)
                .map(|_| [rng.normal(), rng.normal(), rng.normal()])
                .collect(),
            rest: (0..n * 72).map(|_| rng.normal()).collect(),
        };
        let mut out = vec![0f32; n * 4];
        sh.colours_into(&means, [0.0, 0.0, 0.0], 3, &mut out);
        for g in [0, 4095, 4096, n - 1] {
            let d = direction(means[g], [0.0; 3]);
            // Degree 4's rows hold 24 coefficients per channel; the first 15 are used.
            let rest: Vec<f32> = (0..3)
                .flat_map(|ch| sh.rest[g * 72 + ch * 24..g * 72 + ch * 24 + 15].to_vec())
                .collect();
            let want = eval(3, sh.dc[g], &rest, d);
            assert_eq!(&out[g * 4..g * 4 + 3], &want);
            assert_eq!(out[g * 4 + 3], 1.0);
        }
    }
}
