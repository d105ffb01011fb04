//! Test scenes shared by the unit tests of the operator and its products.

use lsplat_core::config::WeightPrecision;
use lsplat_core::{Gaussians, Rng, TileGrid};
use lsplat_device::{Backend, CameraParams, PixelSet};

use crate::CpuBackend;
use crate::operator::CpuOperator;

/// A `w × h` camera at the origin looking down +z at `n` random Gaussians around
/// z = 4, and its operator over a random ~70% of the pixels (tile 16; some tiles
/// empty).
pub(crate) fn operator_of(
    dev: &CpuBackend,
    rng: &mut Rng,
    n: usize,
    (w, h): (u32, u32),
    p: WeightPrecision,
) -> CpuOperator {
    let mut g = Gaussians::default();
    for _ in 0..n {
        g.means.push([
            rng.range(-1.5, 1.5),
            rng.range(-1.0, 1.0),
            rng.range(3.0, 5.0),
        ]);
        let s = rng.range(-4.0, -2.0);
        g.log_scales
            .push([s + rng.range(-0.5, 0.5), s, s + rng.range(-0.5, 0.5)]);
        let u = rng.unit3();
        g.rotations.push([rng.range(0.2, 1.0), u[0], u[1], u[2]]);
        g.opacity_logits.push(rng.range(-3.0, 4.0));
    }
    g.normalize_rotations();
    let camera = CameraParams {
        view: [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
        fx: 0.8 * w as f32,
        fy: 0.8 * w as f32,
        cx: 0.5 * w as f32,
        cy: 0.5 * h as f32,
        width: w,
        height: h,
        near: 0.01,
        far: 1e10,
    };
    let grid = TileGrid::new(16, w, h);
    let geometry = dev.upload_geometry(&g).unwrap();
    let (mut proj, mut bins) = Default::default();
    dev.project(&geometry, &camera, grid, &mut proj).unwrap();
    dev.bin_and_sort(&proj, grid, &mut bins).unwrap();
    let (px, off) = grid.select_pixels(|i| {
        let tile = grid.tile_of(i % w, i / w);
        rng.f32() < 0.7 && tile % 7 != 3
    });
    let set = PixelSet::upload(dev, grid, &px, &off).unwrap();
    dev.build_operator(&proj, &bins, &set, n, p).unwrap()
}

/// [`operator_of`] at 150 × 100.
pub(crate) fn operator(
    dev: &CpuBackend,
    rng: &mut Rng,
    n: usize,
    p: WeightPrecision,
) -> CpuOperator {
    operator_of(dev, rng, n, (150, 100), p)
}
