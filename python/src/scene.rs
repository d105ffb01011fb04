//! `Scene`: a scene's splats, cameras and labels, made from a scene file (or the
//! embedded demo) exactly as the command-line tool loads it, or from arrays.

use std::path::{Path, PathBuf};

use lsplat_core::{Camera as CoreCamera, Config, Gaussians};
use lsplat_data::{ImageLabels, SceneData};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::to_numpy;
use crate::camera::Camera;
use crate::errors::{Error, Result};
use crate::inputs::{read_cameras, read_labels, read_splats};

/// Where a scene's labels come from, for levels other than the ones it holds.
enum Source {
    /// The files (or demo) its configuration names: reloaded as the CLI loads them.
    Configured,
    /// A dataset folder given with arrays of splats and cameras.
    Dataset(PathBuf),
    /// Labels given as arrays (one level).
    Arrays,
}

/// Splats, cameras and per-image labels, with the configuration every call on the
/// scene starts from.
#[pyclass(module = "lsplat._lsplat", name = "Scene", frozen)]
pub struct Scene {
    pub(crate) config: Config,
    pub(crate) gaussians: Gaussians,
    pub(crate) cameras: Vec<CoreCamera>,
    /// Labels held, by level (`[camera]` each).
    labels: Vec<(u8, Vec<ImageLabels>)>,
    source: Source,
}

/// Applies `key=value` overrides (`--set`), relative paths against the working
/// directory.
pub fn apply(cfg: &mut Config, sets: &[String]) -> Result<()> {
    for s in sets {
        cfg.set(s)
            .map_err(|e| Error::Config(format!("config {s:?}: {e}")))?;
    }
    cfg.resolve_paths(Path::new("."));
    cfg.validate()?;
    Ok(())
}

impl Scene {
    /// A scene from the files (or demo) `cfg` names, loaded as `lsplat-engine` does.
    pub fn configured(cfg: Config) -> Result<Scene> {
        lsplat_plugins::check(&cfg)?;
        let level = cfg.scene.level;
        let mut one = cfg.clone();
        one.solve.levels = Vec::new();
        let loaded = lsplat_data::scene::load_configured(&one)?;
        let SceneData {
            gaussians,
            cameras,
            labels,
        } = loaded.data;
        Ok(Scene {
            config: cfg,
            gaussians,
            cameras,
            labels: vec![(level, labels)],
            source: Source::Configured,
        })
    }

    /// A scene of splats and cameras only (renders; no labels to fit).
    pub fn unlabelled(config: Config, gaussians: Gaussians, cameras: Vec<CoreCamera>) -> Scene {
        Scene {
            config,
            gaussians,
            cameras,
            labels: Vec::new(),
            source: Source::Arrays,
        }
    }

    /// The scene's configuration with `sets` applied; the scene's own keys (`scene.*`,
    /// `demo.*`) cannot change.
    pub fn config_with(&self, sets: &[String]) -> Result<Config> {
        let mut cfg = self.config.clone();
        apply(&mut cfg, sets)?;
        if cfg.scene != self.config.scene || cfg.demo != self.config.demo {
            return Err(Error::Config(
                "config: scene.* and demo.* describe the Scene: set them when making it (Scene.from_toml(..., config=...))".into(),
            ));
        }
        Ok(cfg)
    }

    /// The training data of the levels `cfg` asks for (`solve.levels`, else
    /// `scene.level`): the first level's in `SceneData`, the others after.
    pub fn data(&self, cfg: &Config) -> Result<(SceneData, Vec<Vec<ImageLabels>>)> {
        let levels = cfg.solve.levels_or(cfg.scene.level);
        let held: Option<Vec<Vec<ImageLabels>>> = levels
            .iter()
            .map(|l| {
                self.labels
                    .iter()
                    .find(|(k, _)| k == l)
                    .map(|(_, v)| v.clone())
            })
            .collect();
        let mut all = match (held, &self.source) {
            (Some(all), _) => all,
            (None, Source::Configured) => {
                let c = lsplat_data::scene::load_configured(cfg)?;
                let mut all = vec![c.data.labels];
                all.extend(c.more_levels);
                all
            }
            (None, Source::Dataset(dir)) => {
                let mut cams = self.cameras.clone();
                lsplat_data::scene::labels_for_cameras(&mut cams, dir, &levels)?
            }
            (None, Source::Arrays) if self.labels.is_empty() => {
                return Err(Error::Config(
                    "the Scene has no labels (no dataset was given): it renders, but solve and train need a dataset".into(),
                ));
            }
            (None, Source::Arrays) => {
                return Err(Error::Config(format!(
                    "the Scene holds the labels of level {} only (given as arrays); levels {levels:?} were asked for",
                    self.labels[0].0
                )));
            }
        };
        let labels = all.remove(0);
        Ok((
            SceneData {
                gaussians: self.gaussians.clone(),
                cameras: self.cameras.clone(),
                labels,
            },
            all,
        ))
    }

    /// The camera an argument names: an index, a name, or a `Camera`.
    pub fn camera(&self, arg: &str, c: &Bound<'_, PyAny>) -> Result<CoreCamera> {
        if let Ok(cam) = c.cast::<Camera>() {
            return Ok(cam.get().0.clone());
        }
        if let Ok(i) = c.extract::<i64>() {
            let n = self.cameras.len() as i64;
            let k = if i < 0 { i + n } else { i };
            return usize::try_from(k)
                .ok()
                .and_then(|k| self.cameras.get(k))
                .cloned()
                .ok_or_else(|| {
                    Error::Value(format!("{arg}: index {i} is out of range ({n} cameras)"))
                });
        }
        if let Ok(name) = c.extract::<String>() {
            return self
                .cameras
                .iter()
                .find(|cam| cam.name == name)
                .cloned()
                .ok_or_else(|| {
                    let all: Vec<&str> = self
                        .cameras
                        .iter()
                        .take(20)
                        .map(|c| c.name.as_str())
                        .collect();
                    Error::Value(format!(
                        "{arg}: no camera {name:?} in the scene (cameras: {}{})",
                        all.join(", "),
                        if self.cameras.len() > 20 { ", …" } else { "" }
                    ))
                });
        }
        Err(Error::Type(format!(
            "{arg}: expected a camera index, name or lsplat.Camera, got {}",
            c.get_type().name()?
        )))
    }

    /// The labels of the scene's own level, when it has them.
    fn own_labels(&self) -> Option<&[ImageLabels]> {
        let level = self.config.scene.level;
        self.labels
            .iter()
            .find(|(l, _)| *l == level)
            .map(|(_, v)| v.as_slice())
    }
}

#[pymethods]
impl Scene {
    #[new]
    #[pyo3(signature = (splats, cameras, dataset=None, level=1, config=Vec::new()))]
    fn new(
        py: Python<'_>,
        splats: &Bound<'_, PyAny>,
        cameras: &Bound<'_, PyAny>,
        dataset: Option<&Bound<'_, PyAny>>,
        level: u8,
        config: Vec<String>,
    ) -> Result<Scene> {
        let mut cfg = Config::default();
        cfg.set(&format!("scene.level={level}"))
            .map_err(|e| Error::Value(format!("level: {e}")))?;
        apply(&mut cfg, &config)?;
        let gaussians = read_splats(splats)?;
        let mut cams = read_cameras(cameras)?;
        let (labels, source) = match dataset {
            None => (Vec::new(), Source::Arrays),
            Some(d) => match d.extract::<PathBuf>() {
                Ok(dir) => {
                    let dir = std::path::absolute(&dir).unwrap_or(dir);
                    let mut all = py.detach(|| {
                        lsplat_data::scene::labels_for_cameras(&mut cams, &dir, &[level])
                    })?;
                    (vec![(level, all.remove(0))], Source::Dataset(dir))
                }
                Err(_) => (vec![(level, read_labels(d, &mut cams)?)], Source::Arrays),
            },
        };
        if let Some((_, l)) = labels.first() {
            SceneData {
                gaussians: gaussians.clone(),
                cameras: cams.clone(),
                labels: l.clone(),
            }
            .validate()?;
        }
        Ok(Scene {
            config: cfg,
            gaussians,
            cameras: cams,
            labels,
            source,
        })
    }

    /// A scene file, loaded as `lsplat-engine --scene PATH` loads it.
    #[staticmethod]
    #[pyo3(signature = (path, config=Vec::new()))]
    fn from_toml(py: Python<'_>, path: PathBuf, config: Vec<String>) -> Result<Scene> {
        let mut cfg = Config::load(&path)?;
        apply(&mut cfg, &config)?;
        py.detach(|| Scene::configured(cfg))
    }

    /// The embedded demo scene (what `lsplat-engine train` runs with no scene file).
    #[staticmethod]
    #[pyo3(signature = (config=Vec::new()))]
    fn demo(py: Python<'_>, config: Vec<String>) -> Result<Scene> {
        let mut cfg = Config::from_toml(
            lsplat_data::demo::DEMO_SCENE,
            Path::new("<embedded demo scene>"),
        )?;
        apply(&mut cfg, &config)?;
        py.detach(|| Scene::configured(cfg))
    }

    /// The resolved configuration as TOML.
    #[getter]
    fn config_toml(&self) -> String {
        self.config.to_toml()
    }

    /// The resolved configuration as JSON.
    #[getter]
    fn config_json(&self) -> Result<String> {
        serde_json::to_string(&self.config).map_err(|e| Error::Engine(e.to_string()))
    }

    /// Number of Gaussians N.
    #[getter]
    fn num_gaussians(&self) -> usize {
        self.gaussians.len()
    }

    /// Feature channels C of the labels (None without labels).
    #[getter]
    fn channels(&self) -> Option<usize> {
        self.own_labels().and_then(|l| l.first()).map(|l| l.dim)
    }

    /// The LangSplat level of the labels held (1, 2 or 3).
    #[getter]
    fn level(&self) -> u8 {
        self.config.scene.level
    }

    /// The cameras, in the scene's order.
    #[getter]
    fn cameras(&self) -> Vec<Camera> {
        self.cameras.iter().cloned().map(Camera).collect()
    }

    /// The splats: means `[N, 3]`, log_scales `[N, 3]`, rotations `[N, 4]` (w, x, y, z),
    /// opacity_logits `[N]` (float32 copies).
    fn splats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let g = &self.gaussians;
        let n = g.len();
        let d = PyDict::new(py);
        d.set_item("means", to_numpy(py, g.means.concat(), &[n, 3])?)?;
        d.set_item("log_scales", to_numpy(py, g.log_scales.concat(), &[n, 3])?)?;
        d.set_item("rotations", to_numpy(py, g.rotations.concat(), &[n, 4])?)?;
        d.set_item(
            "opacity_logits",
            to_numpy(py, g.opacity_logits.clone(), &[n])?,
        )?;
        Ok(d)
    }

    /// The labels of one camera at the scene's level: `segmentation` `[H, W]` int32
    /// (a row of `features`, or -1 where no mask covers the pixel) and `features`
    /// `[M, C]` float32.
    fn labels<'py>(
        &self,
        py: Python<'py>,
        camera: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyDict>> {
        let cam = self.camera("camera", camera)?;
        let all = self.own_labels().ok_or_else(|| {
            Error::Config("the Scene has no labels (no dataset was given)".into())
        })?;
        let l = all
            .iter()
            .find(|l| l.name == cam.name)
            .ok_or_else(|| Error::Value(format!("camera: no labels for {:?}", cam.name)))?;
        let d = PyDict::new(py);
        d.set_item("name", &l.name)?;
        d.set_item(
            "segmentation",
            to_numpy(py, l.seg_map(), &[l.height as usize, l.width as usize])?,
        )?;
        d.set_item(
            "features",
            to_numpy(py, l.features.clone(), &[l.rows(), l.dim])?,
        )?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "Scene({} Gaussians, {} cameras, level {}, {})",
            self.gaussians.len(),
            self.cameras.len(),
            self.config.scene.level,
            match self.channels() {
                Some(c) => format!("{c}-D labels"),
                None => "no labels".into(),
            }
        )
    }
}

/// Registers the classes.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Camera>()?;
    m.add_class::<Scene>()?;
    Ok(())
}
