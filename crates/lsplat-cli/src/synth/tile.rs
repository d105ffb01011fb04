//! `synth --tile AxB --keep-every K`: a larger (or thinner) scene made from one splat.
//!
//! The splat is repeated on an `A × B` grid in the plane across the up axis, copies side
//! by side (spaced by the splat's 1st–99th percentile extent along each axis), and of
//! every copy only each `K`-th Gaussian is kept. `--tile 3x3` turns the biker splat
//! (152 746 Gaussians) into a scene of 1 374 714, the size of a real LERF scene.

use anyhow::{Result, bail};
use lsplat_data::ply::SplatPly;

/// A tiling request: copies along the two horizontal axes and the thinning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiling {
    /// Copies along the first and second horizontal axis.
    pub copies: (u32, u32),
    /// Keep Gaussian `i` of each copy when `i % keep == 0`.
    pub keep: u32,
}

impl Tiling {
    /// No copies, every Gaussian.
    pub const NONE: Tiling = Tiling {
        copies: (1, 1),
        keep: 1,
    };
}

/// Parses `AxB` (each 1..=16).
pub fn parse_copies(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("`{s}`: expected AxB with A and B from 1 to 16 (e.g. 3x3)");
    let (a, b) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let a: u32 = a.trim().parse().map_err(|_| bad())?;
    let b: u32 = b.trim().parse().map_err(|_| bad())?;
    if !(1..=16).contains(&a) || !(1..=16).contains(&b) {
        return Err(bad());
    }
    Ok((a, b))
}

/// The `p`-quantile of `v` (sorted in place).
fn quantile(v: &mut [f32], p: f64) -> f32 {
    v.sort_by(f32::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// `ply` tiled as `t` asks, with `axes` the two horizontal coordinate axes (the
/// copies go along `axes.0`, then `axes.1`). Colours and extra properties travel with
/// their Gaussians.
pub fn tile(ply: &SplatPly, t: Tiling, axes: (usize, usize)) -> Result<SplatPly> {
    let g = &ply.gaussians;
    if g.is_empty() {
        bail!("no Gaussians to tile");
    }
    if t.keep == 0 {
        bail!("--keep-every must be at least 1");
    }
    if t == Tiling::NONE {
        return Ok(ply.clone());
    }
    let span = |axis: usize| {
        let mut v: Vec<f32> = g.means.iter().map(|m| m[axis]).collect();
        quantile(&mut v, 0.99) - quantile(&mut v, 0.01)
    };
    let (s0, s1) = (span(axes.0), span(axes.1));
    let kept: Vec<usize> = (0..g.len()).step_by(t.keep as usize).collect();
    let (a, b) = t.copies;
    let copies = (a * b) as usize;
    let n = kept.len() * copies;
    let rest = ply.rest_len();
    let ne = ply.extra_names.len();
    let mut out = SplatPly {
        sh_degree: ply.sh_degree,
        extra_names: ply.extra_names.clone(),
        ..SplatPly::default()
    };
    let o = &mut out.gaussians;
    o.means.reserve(n);
    o.log_scales.reserve(n);
    o.rotations.reserve(n);
    o.opacity_logits.reserve(n);
    out.sh_dc.reserve(n);
    out.sh_rest.reserve(n * rest);
    out.extra.reserve(n * ne);
    for j in 0..b {
        for i in 0..a {
            let d0 = (i as f32 - (a - 1) as f32 / 2.0) * s0;
            let d1 = (j as f32 - (b - 1) as f32 / 2.0) * s1;
            for &k in &kept {
                let mut m = g.means[k];
                m[axes.0] += d0;
                m[axes.1] += d1;
                o.means.push(m);
                o.log_scales.push(g.log_scales[k]);
                o.rotations.push(g.rotations[k]);
                o.opacity_logits.push(g.opacity_logits[k]);
                out.sh_dc.push(ply.sh_dc[k]);
                out.sh_rest
                    .extend_from_slice(&ply.sh_rest[k * rest..(k + 1) * rest]);
                out.extra
                    .extend_from_slice(&ply.extra[k * ne..(k + 1) * ne]);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splat(n: usize) -> SplatPly {
        let mut p = SplatPly {
            sh_degree: 1,
            extra_names: vec!["f_lang_0".into()],
            ..SplatPly::default()
        };
        for i in 0..n {
            let x = i as f32;
            p.gaussians.means.push([x, 10.0 + x, -x]);
            p.gaussians.log_scales.push([-2.0, -2.5, -3.0 + 0.01 * x]);
            p.gaussians.rotations.push([1.0, 0.0, 0.0, 0.0]);
            p.gaussians.opacity_logits.push(0.1 * x);
            p.sh_dc.push([x, 0.5, 0.25]);
            p.sh_rest.extend((0..9).map(|r| x + r as f32));
            p.extra.push(2.0 * x);
        }
        p
    }

    #[test]
    fn copies_sit_side_by_side_and_carry_every_property() {
        // 101 Gaussians spaced 1 apart: the 1st–99th percentile extent is 98 (x) and
        // 98 (z), so copies are 98 apart, centred on the original.
        let p = splat(101);
        let t = tile(
            &p,
            Tiling {
                copies: (3, 2),
                keep: 1,
            },
            (0, 2),
        )
        .unwrap();
        assert_eq!(t.gaussians.len(), 6 * 101);
        t.gaussians.validate().unwrap();
        assert_eq!(t.sh_rest.len(), 6 * 101 * 9);
        assert_eq!(t.extra.len(), 6 * 101);
        for j in 0..2 {
            for i in 0..3 {
                let c = (j * 3 + i) * 101;
                for k in [0, 50, 100] {
                    let m = t.gaussians.means[c + k];
                    let want = [
                        k as f32 + (i as f32 - 1.0) * 98.0,
                        10.0 + k as f32,
                        -(k as f32) + (j as f32 - 0.5) * 98.0,
                    ];
                    assert_eq!(m, want, "copy ({i}, {j}), Gaussian {k}");
                    assert_eq!(t.sh_dc[c + k], p.sh_dc[k]);
                    assert_eq!(
                        t.sh_rest[(c + k) * 9..(c + k + 1) * 9],
                        p.sh_rest[k * 9..k * 9 + 9]
                    );
                    assert_eq!(t.extra[c + k], p.extra[k]);
                    assert_eq!(t.gaussians.log_scales[c + k], p.gaussians.log_scales[k]);
                    assert_eq!(
                        t.gaussians.opacity_logits[c + k],
                        p.gaussians.opacity_logits[k]
                    );
                }
            }
        }
    }

    #[test]
    fn thinning_keeps_every_kth_gaussian_of_each_copy() {
        let p = splat(50);
        let t = tile(
            &p,
            Tiling {
                copies: (1, 2),
                keep: 16,
            },
            (0, 2),
        )
        .unwrap();
        // Gaussians 0, 16, 32, 48 of each of the two copies.
        assert_eq!(t.gaussians.len(), 8);
        assert_eq!(t.sh_dc[1], p.sh_dc[16]);
        assert_eq!(t.sh_dc[7], p.sh_dc[48]);
        assert_eq!(tile(&p, Tiling::NONE, (0, 2)).unwrap(), p);
        assert!(tile(&SplatPly::default(), Tiling::NONE, (0, 2)).is_err());
    }

    #[test]
    fn copies_parse_as_a_by_b() {
        assert_eq!(parse_copies("3x3"), Ok((3, 3)));
        assert_eq!(parse_copies("2X4"), Ok((2, 4)));
        for bad in ["3", "0x3", "3x", "x3", "17x1", "ax2", "3x3x3"] {
            assert!(parse_copies(bad).is_err(), "{bad}");
        }
    }
}
