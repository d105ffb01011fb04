//! A camera's blending weights over its whole image as a plain sparse matrix (for
//! tools and the Python package's `operator`): the CPU operator of every pixel, its
//! rows put in row-major pixel order.

use lsplat_core::config::WeightPrecision;
use lsplat_core::{Camera, TileGrid};
use lsplat_cpu::CpuBackend;
use lsplat_cpu::project::CpuGeometry;
use lsplat_device::{Backend, DeviceError, PixelSet};

use crate::cache::{Scratch, bin, project};

/// `W` of one camera, `[H·W, N]`, in compressed sparse rows: row `y·W + x` holds the
/// weights α·T of the Gaussians pixel (x, y) composites, front to back; a render of
/// `[N, C]` features is `W·x`.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageOperator {
    /// Rows (pixels, `H·W`).
    pub rows: usize,
    /// Columns (Gaussians).
    pub cols: usize,
    /// Row offsets into `indices` / `weights` (`rows + 1`).
    pub indptr: Vec<u64>,
    /// Each entry's Gaussian.
    pub indices: Vec<u32>,
    /// Each entry's weight α·T.
    pub weights: Vec<f32>,
}

/// Builds the operator of every pixel of `cam` on the CPU (tile size and clip planes
/// as the renderer's; weights rounded to `precision` as the cached operator's are).
pub fn image_operator(
    dev: &CpuBackend,
    geometry: &CpuGeometry,
    gaussians: usize,
    cam: &Camera,
    tile: u32,
    clip: (f32, f32),
    precision: WeightPrecision,
) -> Result<ImageOperator, DeviceError> {
    let grid = TileGrid::new(tile, cam.width, cam.height);
    let mut scratch = Scratch::<CpuBackend>::default();
    project(dev, geometry, cam, grid, clip, &mut scratch)?;
    bin(dev, grid, &mut scratch)?;
    let (order, offsets) = grid.all_pixels();
    let set = PixelSet::upload(dev, grid, &order, &offsets)?;
    let op = dev.build_operator(
        &scratch.projection,
        &scratch.bins,
        &set,
        gaussians,
        precision,
    )?;
    let (row_ptr, cols, vals) = op.to_csr();
    // Tile-major rows → row-major: pixel p is row `row_of[p]` of the operator.
    let rows = order.len();
    let mut row_of = vec![0u32; rows];
    for (r, &p) in order.iter().enumerate() {
        row_of[p as usize] = r as u32;
    }
    let mut indptr = Vec::with_capacity(rows + 1);
    let (mut indices, mut weights) = (
        Vec::with_capacity(cols.len()),
        Vec::with_capacity(cols.len()),
    );
    indptr.push(0u64);
    for &r in &row_of {
        let span = row_ptr[r as usize] as usize..row_ptr[r as usize + 1] as usize;
        indices.extend_from_slice(&cols[span.clone()]);
        weights.extend_from_slice(&vals[span]);
        indptr.push(indices.len() as u64);
    }
    Ok(ImageOperator {
        rows,
        cols: gaussians,
        indptr,
        indices,
        weights,
    })
}

impl ImageOperator {
    /// `W·x` for `[cols, channels]` features, each row summed in entry order (what
    /// the renderer composites).
    pub fn apply(&self, x: &[f32], channels: usize) -> Vec<f32> {
        let mut out = vec![0f32; self.rows * channels];
        for (r, o) in out.chunks_exact_mut(channels).enumerate() {
            for k in self.indptr[r] as usize..self.indptr[r + 1] as usize {
                let g = self.indices[k] as usize;
                for (oc, xc) in o.iter_mut().zip(&x[g * channels..(g + 1) * channels]) {
                    *oc += self.weights[k] * xc;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use lsplat_core::Gaussians;

    use super::*;
    use crate::cache::render_image;

    /// The whole image's operator times the features is the render, bit for bit, and
    /// its rows are the CPU operator's rows of the same pixels.
    #[test]
    fn times_features_is_the_render() {
        let mut rng = lsplat_core::Rng::new(5);
        let n = 300;
        let g = Gaussians {
            means: (0..n)
                .map(|_| [rng.normal() * 0.7, rng.normal() * 0.5, 4.0 + rng.normal()])
                .collect(),
            log_scales: (0..n).map(|_| [-2.3 + 0.3 * rng.normal(); 3]).collect(),
            rotations: vec![[1.0, 0.0, 0.0, 0.0]; n],
            opacity_logits: (0..n).map(|_| rng.normal()).collect(),
        };
        let cam = Camera::from_c2w(
            "c",
            (41, 29),
            (35.0, 35.0, 20.5, 14.5),
            glam::Mat3::IDENTITY,
            glam::Vec3::ZERO,
        );
        let dev = CpuBackend::new(2);
        let geom = dev.upload_geometry(&g).unwrap();
        let clip = (0.01, 1e10);
        let op = image_operator(&dev, &geom, n, &cam, 16, clip, WeightPrecision::F32).unwrap();
        assert_eq!((op.rows, op.cols), (41 * 29, n));
        assert_eq!(op.indptr.len(), op.rows + 1);
        assert!(op.indices.len() > op.rows, "{} entries", op.indices.len());
        let c = 3;
        let x: Vec<f32> = (0..n * c).map(|_| rng.normal()).collect();
        let want = render_image(&dev, &geom, &cam, 16, clip, &dev.upload(&x).unwrap(), c).unwrap();
        assert_eq!(op.apply(&x, c), want);
        // Row (x, y) = (7, 20) against the tile-major operator's own row of that pixel.
        let grid = TileGrid::new(16, 41, 29);
        let (order, offsets) = grid.all_pixels();
        let p = 20 * 41 + 7;
        let r = order.iter().position(|&q| q == p).unwrap();
        let mut s = Scratch::<CpuBackend>::default();
        project(&dev, &geom, &cam, grid, clip, &mut s).unwrap();
        bin(&dev, grid, &mut s).unwrap();
        let set = PixelSet::upload(&dev, grid, &order, &offsets).unwrap();
        let tiled = dev
            .build_operator(&s.projection, &s.bins, &set, n, WeightPrecision::F32)
            .unwrap();
        let span = op.indptr[p as usize] as usize..op.indptr[p as usize + 1] as usize;
        let got: Vec<(u32, f32)> = op.indices[span.clone()]
            .iter()
            .copied()
            .zip(op.weights[span].iter().copied())
            .collect();
        assert!(!got.is_empty());
        assert_eq!(got, tiled.row(r));
    }
}
