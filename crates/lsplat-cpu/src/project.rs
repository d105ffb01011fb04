//! EWA projection of 3D Gaussians to screen-space splats.

use lsplat_core::constants::{ALPHA_THRESHOLD, EPS2D, EXTENT_SIGMA, FOV_GUARD};
use lsplat_core::{Gaussians, TileGrid};
use lsplat_device::CameraParams;

/// Geometry resident in host memory, shared (a clone is a reference to the same
/// arrays: a projection and the operators built from it keep it to re-project).
#[derive(Clone, Debug, Default)]
pub struct CpuGeometry(std::sync::Arc<GeometryData>);

impl std::ops::Deref for CpuGeometry {
    type Target = GeometryData;
    fn deref(&self) -> &GeometryData {
        &self.0
    }
}

/// What [`CpuGeometry`] holds: positions, and precomputed 3D covariances (upper
/// triangle `xx, xy, xz, yy, yz, zz`) and opacities.
#[derive(Debug, Default)]
pub struct GeometryData {
    /// Centres.
    pub means: Vec<[f32; 3]>,
    /// World-space covariances (upper triangle), in f64.
    pub cov3d: Vec<[f64; 6]>,
    /// Opacities (sigmoid of the logits).
    pub opacity: Vec<f32>,
    /// Per Gaussian, what depends on its opacity alone (computed once, not per
    /// camera): its [`alpha_cut`](crate::walk::alpha_cut) and its [`extent`].
    pub cut_extent: Vec<(f64, f64)>,
}

impl CpuGeometry {
    /// Precomputes covariances and opacities.
    pub fn new(g: &Gaussians) -> Self {
        let cov3d = g
            .log_scales
            .iter()
            .zip(&g.rotations)
            .map(|(s, q)| covariance(q, s))
            .collect();
        let opacity: Vec<f32> = (0..g.len()).map(|i| g.opacity(i)).collect();
        let cut_extent = opacity
            .iter()
            .map(|&o| (crate::walk::alpha_cut(o), extent(o)))
            .collect();
        CpuGeometry(std::sync::Arc::new(GeometryData {
            means: g.means.clone(),
            cov3d,
            opacity,
            cut_extent,
        }))
    }

    /// Number of Gaussians.
    pub fn len(&self) -> usize {
        self.means.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.means.is_empty()
    }
}

/// Σ = R·S·Sᵀ·Rᵀ in f64 (defined once in lsplat-core; the GPU backend rounds it to f32).
pub use lsplat_core::gaussians::covariance;

/// A projected splat as the compositor reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProjSplat {
    /// Screen-space centre (pixels), in f64 so that the offset to a pixel centre is
    /// exact to f32 precision however far from the origin the splat lies.
    pub xy: [f64; 2],
    /// Inverse 2D covariance `(a, b, c)`: σ = ½(a·dx² + c·dy²) + b·dx·dy. Kept in
    /// f64: for elongated splats σ is a small difference of large terms.
    pub conic: [f64; 3],
    /// Opacity.
    pub opacity: f32,
    /// Vertical half-extent of the pixels it may reach with α ≥ 1/255
    /// ([`crate::walk::row_extent`]).
    pub row_extent: f32,
    /// Camera-space depth.
    pub depth: f32,
    /// ln(255·o) + 1e-3 ([`crate::walk::alpha_cut`]): σ beyond it gives α < 1/255.
    pub cut: f64,
    /// Tile rectangle `[x0, y0, x1, y1)`; empty (all zero) when culled.
    pub rect: [u32; 4],
}

/// Projected splats of one camera, one entry per Gaussian.
#[derive(Clone, Debug, Default)]
pub struct CpuProjection {
    /// One entry per Gaussian.
    pub splats: Vec<ProjSplat>,
    /// The geometry and camera they were projected from (set by [`project_all`]):
    /// what an operator that recomputes its weights re-projects.
    pub source: Option<Source>,
}

/// The geometry and camera of a projection.
#[derive(Clone, Debug)]
pub struct Source {
    /// The geometry (shared, not copied).
    pub geometry: CpuGeometry,
    /// The camera.
    pub camera: CameraParams,
}

impl CpuProjection {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.splats.len() * std::mem::size_of::<ProjSplat>()
    }
}

/// One projected splat.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Splat2d {
    /// Centre.
    pub xy: [f64; 2],
    /// Conic.
    pub conic: [f64; 3],
    /// Depth.
    pub depth: f32,
    /// Half extents of the bounding box in pixels.
    pub radius: [f64; 2],
}

/// The half extent of a splat's box in standard deviations: where α falls to the
/// threshold (`√(2·ln(o/threshold))`), at most [`EXTENT_SIGMA`].
pub fn extent(opacity: f32) -> f64 {
    (2.0 * (opacity / ALPHA_THRESHOLD).ln())
        .sqrt()
        .min(EXTENT_SIGMA) as f64
}

/// Projects one Gaussian (`extent`: its [`extent`]); `None` when culled (behind the
/// near plane, beyond the far plane, degenerate, or too transparent to ever pass the
/// alpha threshold).
pub fn project_one(
    mean: [f32; 3],
    cov: &[f64; 6],
    opacity: f32,
    extent: f64,
    cam: &CameraParams,
) -> Option<Splat2d> {
    // Per-Gaussian work is cheap next to compositing, so it runs in f64: the conic's
    // rounding error is amplified by σ in every α it produces.
    let v: [f64; 12] = cam.view.map(f64::from);
    let m = mean.map(f64::from);
    let pc = [
        v[0] * m[0] + v[1] * m[1] + v[2] * m[2] + v[3],
        v[4] * m[0] + v[5] * m[1] + v[6] * m[2] + v[7],
        v[8] * m[0] + v[9] * m[1] + v[10] * m[2] + v[11],
    ];
    let z = pc[2];
    if !(z >= cam.near as f64 && z <= cam.far as f64) || opacity < ALPHA_THRESHOLD {
        return None;
    }
    // Σ_cam = R Σ Rᵀ.
    let r = |i: usize, j: usize| v[i * 4 + j];
    let s = |i: usize, j: usize| {
        let k = match (i.min(j), i.max(j)) {
            (0, 0) => 0,
            (0, 1) => 1,
            (0, 2) => 2,
            (1, 1) => 3,
            (1, 2) => 4,
            _ => 5,
        };
        cov[k]
    };
    let mut rs = [[0f64; 3]; 3];
    for (i, row) in rs.iter_mut().enumerate() {
        for (j, val) in row.iter_mut().enumerate() {
            *val = (0..3).map(|k| r(i, k) * s(k, j)).sum();
        }
    }
    let mut sc = [[0f64; 3]; 3];
    for (i, row) in sc.iter_mut().enumerate() {
        for (j, val) in row.iter_mut().enumerate() {
            *val = (0..3).map(|k| rs[i][k] * r(j, k)).sum();
        }
    }
    // Jacobian of the perspective projection with the guard band clamp.
    let (fx, fy, cx, cy) = (cam.fx as f64, cam.fy as f64, cam.cx as f64, cam.cy as f64);
    let (w, h) = (cam.width as f64, cam.height as f64);
    let guard = FOV_GUARD as f64 - 1.0;
    let lim_xp = (w - cx) / fx + guard * 0.5 * w / fx;
    let lim_xn = cx / fx + guard * 0.5 * w / fx;
    let lim_yp = (h - cy) / fy + guard * 0.5 * h / fy;
    let lim_yn = cy / fy + guard * 0.5 * h / fy;
    let tx = z * (pc[0] / z).clamp(-lim_xn, lim_xp);
    let ty = z * (pc[1] / z).clamp(-lim_yn, lim_yp);
    let j = [
        [fx / z, 0.0, -fx * tx / (z * z)],
        [0.0, fy / z, -fy * ty / (z * z)],
    ];
    let mut jt = [[0f64; 3]; 2];
    for i in 0..2 {
        for k in 0..3 {
            jt[i][k] = (0..3).map(|m| j[i][m] * sc[m][k]).sum();
        }
    }
    let c2 = |i: usize, k: usize| (0..3).map(|m| jt[i][m] * j[k][m]).sum::<f64>();
    let a = c2(0, 0) + EPS2D as f64;
    let b = c2(0, 1);
    let c = c2(1, 1) + EPS2D as f64;
    let det = a * c - b * b;
    if det <= 0.0 || !det.is_finite() {
        return None;
    }
    let inv = 1.0 / det;
    let radius = [(extent * a.sqrt()).ceil(), (extent * c.sqrt()).ceil()];
    Some(Splat2d {
        xy: [fx * pc[0] / z + cx, fy * pc[1] / z + cy],
        conic: [c * inv, -b * inv, a * inv],
        depth: z as f32,
        radius,
    })
}

/// The tiles a splat's box touches, `[x0, y0, x1, y1)`, clamped to the grid.
pub fn tile_rect(s: &Splat2d, grid: TileGrid) -> [u32; 4] {
    let ts = grid.tile_size as f64;
    let clamp = |v: f64, hi: u32| (v.max(0.0) as u32).min(hi);
    [
        clamp(((s.xy[0] - s.radius[0]) / ts).floor(), grid.tiles_x()),
        clamp(((s.xy[1] - s.radius[1]) / ts).floor(), grid.tiles_y()),
        clamp(((s.xy[0] + s.radius[0]) / ts).ceil(), grid.tiles_x()),
        clamp(((s.xy[1] + s.radius[1]) / ts).ceil(), grid.tiles_y()),
    ]
}

/// Projects every Gaussian into `out` (resized in place; no allocation once warm).
pub fn project_all(
    workers: &crate::pool::Workers,
    geom: &CpuGeometry,
    cam: &CameraParams,
    grid: TileGrid,
    out: &mut CpuProjection,
) {
    let n = geom.len();
    // A reference to the geometry and a copy of the camera: no allocation.
    out.source = Some(Source {
        geometry: geom.clone(),
        camera: *cam,
    });
    out.splats.resize(n, ProjSplat::default());
    let parts = if n < 4096 { 1 } else { 4 * workers.threads() };
    let ranges = crate::pool::even_ranges(n, parts);
    workers.for_ranges(
        &ranges,
        &mut out.splats,
        |i| i,
        |r, chunk| {
            for (i, slot) in r.zip(chunk.iter_mut()) {
                let opacity = geom.opacity[i];
                let (cut, extent) = geom.cut_extent[i];
                *slot = match project_one(geom.means[i], &geom.cov3d[i], opacity, extent, cam) {
                    Some(s) => {
                        let tr = tile_rect(&s, grid);
                        let rect = if tr[0] < tr[2] && tr[1] < tr[3] {
                            tr
                        } else {
                            [0; 4]
                        };
                        ProjSplat {
                            xy: s.xy,
                            conic: s.conic,
                            opacity,
                            depth: s.depth,
                            rect,
                            row_extent: crate::walk::row_extent(s.conic, opacity, cut),
                            cut,
                        }
                    }
                    None => ProjSplat {
                        opacity,
                        cut,
                        ..ProjSplat::default()
                    },
                };
            }
        },
    );
}
