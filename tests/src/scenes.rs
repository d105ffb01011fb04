//! Random scenes for parity tests.

use glam::Vec3;
use lsplat_core::{Camera, Gaussians, Rng};

/// A fresh seed for a test run (printed, so a failure can be reproduced with
/// `LSPLAT_SEED=<seed>`).
pub fn fresh_seed(test: &str) -> u64 {
    if let Ok(s) = std::env::var("LSPLAT_SEED")
        && let Ok(v) = s.parse()
    {
        eprintln!("{test}: seed {v} (from LSPLAT_SEED)");
        return v;
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let seed = t ^ (std::process::id() as u64).rotate_left(32);
    eprintln!("{test}: seed {seed} (reproduce with LSPLAT_SEED={seed})");
    seed
}

/// `n` random Gaussians in a cube of half-size 1 around the origin, a camera looking
/// at it from distance ~4, and random `[n, c]` features.
pub fn random_scene(
    seed: u64,
    n: usize,
    c: usize,
    (w, h): (u32, u32),
) -> (Gaussians, Camera, Vec<f32>) {
    let mut rng = Rng::new(seed);
    let mut g = Gaussians::default();
    for _ in 0..n {
        g.means.push([
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
        ]);
        g.log_scales.push([
            rng.range(-3.5, -1.2),
            rng.range(-3.5, -1.2),
            rng.range(-3.5, -1.2),
        ]);
        let q = [rng.normal(), rng.normal(), rng.normal(), rng.normal()];
        g.rotations.push(q);
        g.opacity_logits.push(rng.range(-3.0, 5.0));
    }
    g.normalize_rotations();
    let az = rng.range(0.0, std::f32::consts::TAU);
    let el = rng.range(-0.6, 0.6);
    let d = rng.range(3.2, 4.5);
    let eye = Vec3::new(
        d * el.cos() * az.cos(),
        d * el.cos() * az.sin(),
        d * el.sin(),
    );
    let cam = Camera::look_at(
        "random",
        (w, h),
        rng.range(0.6, 0.9),
        eye,
        Vec3::ZERO,
        Vec3::Z,
    );
    let feats = (0..n * c).map(|_| rng.range(-1.0, 1.0)).collect();
    (g, cam, feats)
}
