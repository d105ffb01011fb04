//! An independent float64 per-pixel reference renderer: every Gaussian is projected
//! in double precision, all of them are sorted by depth, and every pixel composites
//! the whole list front to back. No tiles, no bins, no caches.

use lsplat_core::constants::{ALPHA_THRESHOLD, EPS2D, FOV_GUARD, MAX_ALPHA, TRANSMITTANCE_STOP};
use lsplat_core::{Camera, Gaussians};

/// One Gaussian projected in f64.
#[derive(Clone, Copy, Debug)]
pub struct Splat {
    /// Index.
    pub id: usize,
    /// Screen centre.
    pub xy: [f64; 2],
    /// Conic (a, b, c).
    pub conic: [f64; 3],
    /// Opacity.
    pub opacity: f64,
    /// Depth.
    pub depth: f64,
}

fn mat_mul(a: &[[f64; 3]; 3], b: &[[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let mut o = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            o[i][j] = (0..3).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    o
}

fn transpose(a: &[[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let mut o = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            o[i][j] = a[j][i];
        }
    }
    o
}

/// Projects every Gaussian that passes the culling rules.
pub fn project(g: &Gaussians, cam: &Camera, near: f64, far: f64) -> Vec<Splat> {
    let rot: [[f64; 3]; 3] = {
        let r = cam.rotation;
        let c = [r.x_axis, r.y_axis, r.z_axis];
        let mut o = [[0.0; 3]; 3];
        for (j, col) in c.iter().enumerate() {
            o[0][j] = col.x as f64;
            o[1][j] = col.y as f64;
            o[2][j] = col.z as f64;
        }
        o
    };
    let t = [
        cam.translation.x as f64,
        cam.translation.y as f64,
        cam.translation.z as f64,
    ];
    let (fx, fy, cx, cy) = (cam.fx as f64, cam.fy as f64, cam.cx as f64, cam.cy as f64);
    let (w, h) = (cam.width as f64, cam.height as f64);
    let mut out = Vec::new();
    for i in 0..g.len() {
        let m = g.means[i].map(|v| v as f64);
        let p: Vec<f64> = (0..3)
            .map(|r| rot[r][0] * m[0] + rot[r][1] * m[1] + rot[r][2] * m[2] + t[r])
            .collect();
        let z = p[2];
        let opacity = 1.0 / (1.0 + (-(g.opacity_logits[i] as f64)).exp());
        if !(z >= near && z <= far) || opacity < ALPHA_THRESHOLD as f64 {
            continue;
        }
        let [qw, qx, qy, qz] = g.rotations[i].map(|v| v as f64);
        let r = [
            [
                1.0 - 2.0 * (qy * qy + qz * qz),
                2.0 * (qx * qy - qw * qz),
                2.0 * (qx * qz + qw * qy),
            ],
            [
                2.0 * (qx * qy + qw * qz),
                1.0 - 2.0 * (qx * qx + qz * qz),
                2.0 * (qy * qz - qw * qx),
            ],
            [
                2.0 * (qx * qz - qw * qy),
                2.0 * (qy * qz + qw * qx),
                1.0 - 2.0 * (qx * qx + qy * qy),
            ],
        ];
        let s = g.log_scales[i].map(|v| (v as f64).exp());
        let mut s2 = [[0.0; 3]; 3];
        for k in 0..3 {
            s2[k][k] = s[k] * s[k];
        }
        let sigma = mat_mul(&mat_mul(&r, &s2), &transpose(&r));
        let sigma_cam = mat_mul(&mat_mul(&rot, &sigma), &transpose(&rot));
        let guard = FOV_GUARD as f64 - 1.0;
        let lim_xp = (w - cx) / fx + guard * 0.5 * w / fx;
        let lim_xn = cx / fx + guard * 0.5 * w / fx;
        let lim_yp = (h - cy) / fy + guard * 0.5 * h / fy;
        let lim_yn = cy / fy + guard * 0.5 * h / fy;
        let tx = z * (p[0] / z).clamp(-lim_xn, lim_xp);
        let ty = z * (p[1] / z).clamp(-lim_yn, lim_yp);
        let j = [
            [fx / z, 0.0, -fx * tx / (z * z)],
            [0.0, fy / z, -fy * ty / (z * z)],
            [0.0; 3],
        ];
        let c2 = mat_mul(&mat_mul(&j, &sigma_cam), &transpose(&j));
        let (a, b, c) = (c2[0][0] + EPS2D as f64, c2[0][1], c2[1][1] + EPS2D as f64);
        let det = a * c - b * b;
        if det <= 0.0 {
            continue;
        }
        out.push(Splat {
            id: i,
            xy: [fx * p[0] / z + cx, fy * p[1] / z + cy],
            conic: [c / det, -b / det, a / det],
            opacity,
            depth: z,
        });
    }
    out.sort_by(|a, b| a.depth.total_cmp(&b.depth).then(a.id.cmp(&b.id)));
    out
}

/// Relative depth difference below which two splats may be sorted either way by a
/// backend that sorts float32 depths (a few float32 ulps).
pub const DEPTH_MARGIN: f64 = 1e-6;

/// A rendered pixel and whether a discrete decision was within `margin` (relative)
/// of its threshold, so that float32 rounding could flip it: an alpha or
/// transmittance test, or (when `margin > 0`) the order of two splats that pass the
/// α test (each contributes or ends the pixel) whose depths differ by at most
/// [`DEPTH_MARGIN`] (relative).
#[derive(Clone, Debug)]
pub struct RefPixel {
    /// Composited features.
    pub value: Vec<f64>,
    /// Weights `(gaussian, α·T)` front to back.
    pub weights: Vec<(usize, f64)>,
    /// A decision was ambiguous.
    pub ambiguous: bool,
}

/// Composites one pixel (centre `x + 0.5, y + 0.5`) over the depth-sorted splats.
pub fn pixel(
    splats: &[Splat],
    features: &[f32],
    c: usize,
    x: u32,
    y: u32,
    margin: f64,
) -> RefPixel {
    let (px, py) = (x as f64 + 0.5, y as f64 + 0.5);
    let mut t = 1.0f64;
    let mut value = vec![0.0; c];
    let mut weights = Vec::new();
    let mut ambiguous = false;
    let mut last_depth: Option<f64> = None;
    let at = ALPHA_THRESHOLD as f64;
    let ts = TRANSMITTANCE_STOP as f64;
    // σ and α of a splat at this pixel.
    let look = |s: &Splat| {
        let dx = s.xy[0] - px;
        let dy = s.xy[1] - py;
        let sigma = 0.5 * (s.conic[0] * dx * dx + s.conic[2] * dy * dy) + s.conic[1] * dx * dy;
        (sigma, (s.opacity * (-sigma).exp()).min(MAX_ALPHA as f64))
    };
    // Two depths a backend sorting float32 depths may order either way.
    let tied =
        |a: f64, b: f64| margin > 0.0 && (a - b).abs() <= DEPTH_MARGIN * a.abs().max(b.abs());
    for (k, s) in splats.iter().enumerate() {
        let (sigma, alpha) = look(s);
        if (alpha - at).abs() < margin * at {
            ambiguous = true;
        }
        if sigma < 0.0 || alpha < at {
            continue;
        }
        // Two splats that pass the α test at nearly the same depth may be sorted
        // either way, including the one that ends the pixel: a backend that sorts it
        // first ends the pixel before the other contributes.
        if last_depth.is_some_and(|d| tied(s.depth, d)) {
            ambiguous = true;
        }
        let next = t * (1.0 - alpha);
        if (next - ts).abs() < margin * ts {
            ambiguous = true;
        }
        if next <= ts {
            // So may a splat right behind the one that ends the pixel: sorted first, it
            // would contribute.
            ambiguous |= splats[k + 1..]
                .iter()
                .take_while(|o| tied(o.depth, s.depth))
                .any(|o| {
                    let (sigma, alpha) = look(o);
                    sigma >= 0.0 && alpha >= at * (1.0 - margin)
                });
            break;
        }
        last_depth = Some(s.depth);
        let w = alpha * t;
        for k in 0..c {
            value[k] += w * features[s.id * c + k] as f64;
        }
        weights.push((s.id, w));
        t = next;
    }
    RefPixel {
        value,
        weights,
        ambiguous,
    }
}
