//! `Run`: a finished run directory read back (by the reader of the model that wrote
//! it, as `lsplat-engine render` / `query` read it).

use std::path::PathBuf;

use lsplat_data::DataError;
use lsplat_data::run::{METRICS_FILE, SUMMARY_FILE};
use pyo3::prelude::*;

use crate::arrays::to_numpy;
use crate::errors::{Error, Result};
use crate::scene::Scene;

/// A finished run: its configuration, per-Gaussian features, metrics, checkpoints and
/// the scene it was fitted on (splats and cameras).
#[pyclass(module = "lsplat._lsplat", name = "Run", frozen)]
pub struct Run {
    dir: PathBuf,
    config_toml: String,
    config_json: String,
    channels: usize,
    features: Py<PyAny>,
    decoder: Option<Py<PyAny>>,
    scene: Py<Scene>,
}

#[pymethods]
impl Run {
    /// Opens the run in `path` (a multi-level run: `level` picks its `level_<l>` folder).
    #[staticmethod]
    #[pyo3(signature = (path, level=None))]
    fn open(py: Python<'_>, path: PathBuf, level: Option<u8>) -> Result<Run> {
        let dir = match level {
            Some(l) => path.join(format!("level_{l}")),
            None => path,
        };
        let run = py.detach(|| lsplat_plugins::load_run(&dir))?;
        let n = run.gaussians.len();
        let config_json =
            serde_json::to_string(&run.config).map_err(|e| Error::Engine(e.to_string()))?;
        let decoder = match &run.decoder {
            Some(d) => Some(
                to_numpy(py, d.matrix.clone(), &[run.channels, d.dim])?
                    .into_any()
                    .unbind(),
            ),
            None => None,
        };
        let scene = Scene::unlabelled(run.config.clone(), run.gaussians, run.cameras);
        Ok(Run {
            config_toml: run.config.to_toml(),
            config_json,
            channels: run.channels,
            features: to_numpy(py, run.features, &[n, run.channels])?
                .into_any()
                .unbind(),
            decoder,
            scene: Py::new(py, scene)?,
            dir,
        })
    }

    /// The run directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.dir.clone()
    }

    /// The run's resolved configuration as TOML (its `config.toml`).
    #[getter]
    fn config_toml(&self) -> &str {
        &self.config_toml
    }

    /// The run's resolved configuration as JSON.
    #[getter]
    fn config_json(&self) -> &str {
        &self.config_json
    }

    /// Feature channels C.
    #[getter]
    fn channels(&self) -> usize {
        self.channels
    }

    /// The per-Gaussian features `[N, C]` as the renderer composites them.
    #[getter]
    fn features(&self, py: Python<'_>) -> Py<PyAny> {
        self.features.clone_ref(py)
    }

    /// A LangSplatV2 run's codebook `[C, D]` (what maps composited code weights to
    /// the text space), else None.
    #[getter]
    fn decoder(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.decoder.as_ref().map(|d| d.clone_ref(py))
    }

    /// The scene the run was fitted on: its splats and cameras (no labels).
    #[getter]
    fn scene(&self, py: Python<'_>) -> Py<Scene> {
        self.scene.clone_ref(py)
    }

    /// The text of `summary.json`.
    #[getter]
    fn summary_json(&self) -> Result<String> {
        let p = self.dir.join(SUMMARY_FILE);
        std::fs::read_to_string(&p).map_err(|e| DataError::io(&p, e).into())
    }

    /// `(steps, losses)` of `metrics.jsonl` (empty for a solved run's level folder).
    fn losses<'py>(&self, py: Python<'py>) -> Result<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let p = self.dir.join(METRICS_FILE);
        let rows = if p.exists() {
            lsplat_data::run::read_losses(&p)?
        } else {
            Vec::new()
        };
        let (s, l): (Vec<u64>, Vec<f32>) = rows.into_iter().unzip();
        let k = s.len();
        Ok((
            to_numpy(py, s, &[k])?.into_any(),
            to_numpy(py, l, &[k])?.into_any(),
        ))
    }

    /// `(step, path)` of every checkpoint kept, oldest first.
    fn checkpoints(&self) -> Result<Vec<(u64, PathBuf)>> {
        Ok(lsplat_data::run::list_checkpoints(&self.dir)?)
    }

    fn __repr__(&self) -> String {
        format!("Run({:?}, C = {})", self.dir, self.channels)
    }
}
