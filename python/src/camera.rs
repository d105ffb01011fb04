//! `Camera`: a pinhole camera made in Python (any viewpoint a scene renders from).

use glam::{Mat3, Vec3};
use lsplat_core::Camera as CoreCamera;
use numpy::{PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays::to_numpy;
use crate::errors::{Error, Result};

/// A pinhole camera: image size, intrinsics (pixels) and the world-to-camera pose
/// (OpenCV axes: x right, y down, z forward).
#[pyclass(module = "lsplat._lsplat", name = "Camera", frozen)]
#[derive(Clone)]
pub struct Camera(pub CoreCamera);

/// A 3×4 or 4×4 float matrix argument as 3 rows of 4.
fn pose(arg: &str, obj: &Bound<'_, PyAny>) -> Result<[[f32; 4]; 3]> {
    let read = |v: Vec<f64>, shape: &[usize]| -> Result<[[f32; 4]; 3]> {
        if !(shape == [4, 4] || shape == [3, 4]) {
            return Err(Error::Value(format!(
                "{arg}: shape {shape:?}, expected (4, 4) or (3, 4)"
            )));
        }
        if shape[0] == 4 && v[12..16] != [0.0, 0.0, 0.0, 1.0] {
            return Err(Error::Value(format!(
                "{arg}: the last row is {:?}, not (0, 0, 0, 1)",
                &v[12..16]
            )));
        }
        let mut m = [[0f32; 4]; 3];
        for (i, row) in m.iter_mut().enumerate() {
            for (j, x) in row.iter_mut().enumerate() {
                *x = v[i * 4 + j] as f32;
            }
        }
        Ok(m)
    };
    if let Ok(a) = obj.cast::<numpy::PyArrayDyn<f64>>() {
        let r = a
            .try_readonly()
            .map_err(|e| Error::Value(format!("{arg}: {e}")))?;
        return read(r.as_array().iter().copied().collect(), a.shape());
    }
    if let Ok(a) = obj.cast::<numpy::PyArrayDyn<f32>>() {
        let r = a
            .try_readonly()
            .map_err(|e| Error::Value(format!("{arg}: {e}")))?;
        return read(r.as_array().iter().map(|&x| x as f64).collect(), a.shape());
    }
    match obj.cast::<numpy::PyUntypedArray>() {
        Ok(a) => Err(Error::Value(format!(
            "{arg}: dtype {}, expected float32 or float64",
            a.dtype()
        ))),
        Err(_) => Err(Error::Type(format!(
            "{arg}: expected a numpy.ndarray (4×4 or 3×4), got {}",
            obj.get_type().name()?
        ))),
    }
}

#[pymethods]
impl Camera {
    #[new]
    #[pyo3(signature = (name, width, height, fx, fy, cx, cy, world_to_camera))]
    fn new(
        name: String,
        width: u32,
        height: u32,
        fx: f32,
        fy: f32,
        cx: f32,
        cy: f32,
        world_to_camera: &Bound<'_, PyAny>,
    ) -> Result<Self> {
        let m = pose("world_to_camera", world_to_camera)?;
        let col = |j: usize| Vec3::new(m[0][j], m[1][j], m[2][j]);
        let cam = CoreCamera {
            name,
            width,
            height,
            fx,
            fy,
            cx,
            cy,
            rotation: Mat3::from_cols(col(0), col(1), col(2)),
            translation: col(3),
        };
        cam.validate()?;
        Ok(Camera(cam))
    }

    /// Image name (matches the labels' image).
    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }

    /// Image width in pixels.
    #[getter]
    fn width(&self) -> u32 {
        self.0.width
    }

    /// Image height in pixels.
    #[getter]
    fn height(&self) -> u32 {
        self.0.height
    }

    /// `(fx, fy, cx, cy)` in pixels.
    #[getter]
    fn intrinsics(&self) -> (f32, f32, f32, f32) {
        (self.0.fx, self.0.fy, self.0.cx, self.0.cy)
    }

    /// The 4×4 world-to-camera matrix (float32).
    #[getter]
    fn world_to_camera<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (r, t) = (self.0.rotation, self.0.translation);
        let mut m = vec![0f32; 16];
        for i in 0..3 {
            for j in 0..3 {
                m[i * 4 + j] = r.col(j)[i];
            }
            m[i * 4 + 3] = t[i];
        }
        m[15] = 1.0;
        Ok(to_numpy(py, m, &[4, 4])?.into_any())
    }

    fn __repr__(&self) -> String {
        format!(
            "Camera({:?}, {}x{}, fx={}, fy={}, cx={}, cy={})",
            self.0.name, self.0.width, self.0.height, self.0.fx, self.0.fy, self.0.cx, self.0.cy
        )
    }
}
