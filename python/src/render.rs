//! `render` (whole images through the renderer `lsplat-engine render` uses) and
//! `operator` (a camera's blending weights as a sparse matrix).

use lsplat_core::{Camera, Config, Gaussians};
use lsplat_device::Backend;
use lsplat_render::views::Views;
use lsplat_render::{BackendVisitor, CpuBackend, Device};
use pyo3::prelude::*;

use crate::arrays::{Dim, array, slice, to_numpy};
use crate::errors::{Error, Result};
use crate::scene::Scene;

struct RenderJob<'a, 'py> {
    py: Python<'py>,
    gaussians: &'a Gaussians,
    features: &'a [f32],
    channels: usize,
    cameras: &'a [Camera],
    cfg: &'a Config,
    /// Called with the index of each camera rendered (progress).
    on_camera: Option<Bound<'py, PyAny>>,
}

impl BackendVisitor for RenderJob<'_, '_> {
    /// Per camera: `[H·W, C]` features and `[H·W]` opacity, row-major.
    type Output = Result<Vec<(Vec<f32>, Vec<f32>)>>;

    fn visit<B: Backend>(self, dev: B) -> Self::Output {
        let py = self.py;
        let views =
            py.detach(|| Views::new(&dev, self.gaussians, self.features, self.channels, self.cfg))?;
        let mut out = Vec::with_capacity(self.cameras.len());
        for (i, cam) in self.cameras.iter().enumerate() {
            let one = py.detach(|| -> Result<_> {
                let px = cam.pixel_count();
                let mut img = Vec::with_capacity(px * self.channels);
                let mut alpha = Vec::with_capacity(px);
                views.render(cam, |band| {
                    img.extend_from_slice(band.features);
                    alpha.extend_from_slice(band.alpha);
                    Ok::<_, Error>(())
                })?;
                Ok((img, alpha))
            })?;
            out.push(one);
            if let Some(cb) = &self.on_camera {
                cb.call1((i,))?;
            }
            py.check_signals()?;
        }
        Ok(out)
    }
}

/// Renders `[N, C]` features at each camera: per camera the `[H, W, C]` image and
/// the `[H, W]` opacity.
#[pyfunction]
#[pyo3(signature = (features, scene, cameras, config=Vec::new(), on_camera=None))]
pub fn render<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    scene: &Bound<'py, Scene>,
    cameras: Vec<Bound<'py, PyAny>>,
    config: Vec<String>,
    on_camera: Option<Bound<'py, PyAny>>,
) -> Result<Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    let scene = scene.get();
    let n = scene.gaussians.len();
    let (feats, shape) = array::<f32>(
        "features",
        features,
        Some(&[Dim::Is(n, "Gaussians"), Dim::Any]),
    )?;
    let c = shape[1];
    if c == 0 {
        return Err(Error::Value("features: no channels".into()));
    }
    let x = slice("features", &feats)?;
    let cfg = scene.config_with(&config)?;
    let cams = cameras
        .iter()
        .enumerate()
        .map(|(i, cam)| scene.camera(&format!("cameras[{i}]"), cam))
        .collect::<Result<Vec<_>>>()?;
    // Every image is returned whole ([H, W, C] features and [H, W] opacity, f32):
    // refused from the cameras' sizes before anything is allocated.
    let pixels = cams.iter().fold(0u64, |t, cam| {
        t.saturating_add(cam.width as u64 * cam.height as u64)
    });
    lsplat_core::memory::check_fits(
        &format!("{} rendered images of {c} channels", cams.len()),
        pixels,
        4 * (c as u64 + 1),
    )?;
    let dev = py.detach(|| Device::open(&cfg.device, &cfg.simt))?;
    let images = dev.visit(RenderJob {
        py,
        gaussians: &scene.gaussians,
        features: x,
        channels: c,
        cameras: &cams,
        cfg: &cfg,
        on_camera,
    })?;
    images
        .into_iter()
        .zip(&cams)
        .map(|((img, alpha), cam)| {
            let (h, w) = (cam.height as usize, cam.width as usize);
            Ok((
                to_numpy(py, img, &[h, w, c])?.into_any(),
                to_numpy(py, alpha, &[h, w])?.into_any(),
            ))
        })
        .collect()
}

/// The parts of a camera's operator as CSR: `(weights, indices, indptr, (rows, cols))`.
type Csr<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    (usize, usize),
);

/// A camera's blending weights over its whole image, built on the CPU: rows are the
/// pixels `y·W + x`, columns the Gaussians.
#[pyfunction]
#[pyo3(signature = (scene, camera, config=Vec::new()))]
pub fn operator<'py>(
    py: Python<'py>,
    scene: &Bound<'py, Scene>,
    camera: &Bound<'py, PyAny>,
    config: Vec<String>,
) -> Result<Csr<'py>> {
    let scene = scene.get();
    let cfg = scene.config_with(&config)?;
    let cam = scene.camera("camera", camera)?;
    let n = scene.gaussians.len();
    let op = py.detach(|| -> Result<_> {
        let dev = CpuBackend::new(cfg.device.threads as usize);
        let geometry = dev.upload_geometry(&scene.gaussians)?;
        Ok(lsplat_render::csr::image_operator(
            &dev,
            &geometry,
            n,
            &cam,
            cfg.render.tile_size,
            (cfg.render.near, cfg.render.far),
            cfg.render.operator_precision,
        )?)
    })?;
    let nnz = op.indices.len();
    let indices: Vec<i32> = op.indices.iter().map(|&g| g as i32).collect();
    let indptr = if nnz <= i32::MAX as usize {
        to_numpy(
            py,
            op.indptr.iter().map(|&p| p as i32).collect(),
            &[op.rows + 1],
        )?
        .into_any()
    } else {
        to_numpy(
            py,
            op.indptr.iter().map(|&p| p as i64).collect(),
            &[op.rows + 1],
        )?
        .into_any()
    };
    Ok((
        to_numpy(py, op.weights, &[nnz])?.into_any(),
        to_numpy(py, indices, &[nnz])?.into_any(),
        indptr,
        (op.rows, op.cols),
    ))
}
