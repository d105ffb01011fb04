//! `Camera` and `Scene`: a scene's splats, cameras and labels, made from a scene file
//! (or the embedded demo) exactly as the command-line tool loads it, or from arrays.

use std::path::{Path, PathBuf};

use glam::{Mat3, Vec3};
use lsplat_core::{Camera as CoreCamera, Config, Gaussians};
use lsplat_data::{ImageLabels, SceneData};
use numpy::{PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{Dim, array, slice, to_numpy};
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

/// Gaussians from a PLY path or a mapping of arrays.
fn read_splats<'py>(obj: &Bound<'py, PyAny>) -> Result<Gaussians> {
    if let Ok(path) = obj.extract::<PathBuf>() {
        return Ok(lsplat_data::ply::read_ply(&path)?.gaussians);
    }
    let Ok(d) = obj.cast::<PyDict>() else {
        return Err(Error::Type(format!(
            "splats: expected a PLY path or a dict of arrays (means, log_scales, rotations, opacity_logits), got {}",
            obj.get_type().name()?
        )));
    };
    const KEYS: [&str; 4] = ["means", "log_scales", "rotations", "opacity_logits"];
    for k in d.keys() {
        let k: String = k.extract()?;
        if !KEYS.contains(&k.as_str()) {
            return Err(Error::Value(format!(
                "splats: unknown key {k:?} (expected {})",
                KEYS.join(", ")
            )));
        }
    }
    let get = |k: &str| -> Result<Bound<'py, PyAny>> {
        d.get_item(k)?
            .ok_or_else(|| Error::Value(format!("splats: no {k:?} array")))
    };
    let means = get("means")?;
    let (m, shape) = array::<f32>("splats['means']", &means, Some(&[Dim::Any, Dim::Is(3, "")]))?;
    let n = shape[0];
    let rows = |name: &str, obj: &Bound<'py, PyAny>, w: usize| -> Result<Vec<f32>> {
        let dims: Vec<Dim> = if w == 1 {
            vec![Dim::Is(n, "Gaussians")]
        } else {
            vec![Dim::Is(n, "Gaussians"), Dim::Is(w, "")]
        };
        let arg = format!("splats['{name}']");
        let (a, _) = array::<f32>(&arg, obj, Some(&dims))?;
        Ok(slice(&arg, &a)?.to_vec())
    };
    let scales = rows("log_scales", &get("log_scales")?, 3)?;
    let rots = rows("rotations", &get("rotations")?, 4)?;
    let opac = rows("opacity_logits", &get("opacity_logits")?, 1)?;
    let m = slice("splats['means']", &m)?;
    let mut g = Gaussians {
        means: m.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect(),
        log_scales: scales.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect(),
        rotations: rots
            .chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect(),
        opacity_logits: opac,
    };
    // Rows already of unit length (to float32 rounding) are kept as given, so a scene's
    // own `splats()` round-trip bit for bit; the others are normalised as the PLY reader
    // normalises them.
    let unit = |q: &[f32; 4]| {
        let n2: f64 = q.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        (n2.sqrt() - 1.0).abs() <= 1e-6
    };
    if !g.rotations.iter().all(unit) {
        let keep: Vec<bool> = g.rotations.iter().map(unit).collect();
        let given = g.rotations.clone();
        g.normalize_rotations();
        for ((q, k), orig) in g.rotations.iter_mut().zip(keep).zip(given) {
            if k {
                *q = orig;
            }
        }
    }
    g.validate()?;
    Ok(g)
}

/// Cameras from a path (COLMAP folder, cameras.json, transforms.json) or a sequence
/// of `Camera`s.
fn read_cameras(obj: &Bound<'_, PyAny>) -> Result<Vec<CoreCamera>> {
    if let Ok(path) = obj.extract::<PathBuf>() {
        let mut cams = lsplat_data::cameras::load_cameras(&path)?;
        cams.sort_by(|a, b| a.name.cmp(&b.name));
        return Ok(cams);
    }
    let mut out = Vec::new();
    for (i, c) in obj.try_iter()?.enumerate() {
        let c = c?;
        let cam = c.cast::<Camera>().map_err(|_| {
            Error::Type(format!(
                "cameras[{i}]: expected an lsplat.Camera (or give a cameras path)"
            ))
        })?;
        out.push(cam.get().0.clone());
    }
    if out.is_empty() {
        return Err(Error::Value("cameras: no cameras".into()));
    }
    Ok(out)
}

/// Labels from a sequence of `{"name", "segmentation", "features"}` dicts, aligned with
/// `cameras` (each rescaled to its labels' size).
fn read_labels<'py>(
    obj: &Bound<'py, PyAny>,
    cameras: &mut [CoreCamera],
) -> Result<Vec<ImageLabels>> {
    let mut given = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        let arg = format!("dataset[{i}]");
        let d = item.cast::<PyDict>().map_err(|_| {
            Error::Type(format!(
                "{arg}: expected a dict with name, segmentation and features"
            ))
        })?;
        let get = |k: &str| -> Result<Bound<'py, PyAny>> {
            d.get_item(k)?
                .ok_or_else(|| Error::Value(format!("{arg}: no {k:?}")))
        };
        let name: String = get("name")?
            .extract()
            .map_err(|_| Error::Type(format!("{arg}['name']: expected a str")))?;
        let seg_arg = format!("{arg}['segmentation']");
        let (seg, shape) =
            array::<i32>(&seg_arg, &get("segmentation")?, Some(&[Dim::Any, Dim::Any]))?;
        let feat_arg = format!("{arg}['features']");
        let (feat, fshape) =
            array::<f32>(&feat_arg, &get("features")?, Some(&[Dim::Any, Dim::Any]))?;
        let labels = ImageLabels::from_seg_map(
            name,
            (shape[1] as u32, shape[0] as u32),
            slice(&seg_arg, &seg)?,
            slice(&feat_arg, &feat)?.to_vec(),
            fshape[1],
        )?;
        given.push(labels);
    }
    let mut out = Vec::with_capacity(cameras.len());
    let mut missing = Vec::new();
    for cam in cameras.iter_mut() {
        match given.iter().position(|l| l.name == cam.name) {
            Some(i) => {
                let l = given.swap_remove(i);
                *cam = lsplat_data::scene::fit_camera(cam, &l.name, (l.width, l.height))?;
                out.push(l);
            }
            None => missing.push(cam.name.clone()),
        }
    }
    if !missing.is_empty() || !given.is_empty() {
        let extra: Vec<&str> = given.iter().map(|l| l.name.as_str()).collect();
        return Err(Error::Value(format!(
            "dataset: cameras and labelled images differ; cameras without labels: [{}]; labels without a camera: [{}]",
            missing.join(", "),
            extra.join(", ")
        )));
    }
    Ok(out)
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
