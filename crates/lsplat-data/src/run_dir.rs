//! Reading back what a run directory holds (written by `train`, or by any tool that
//! writes the same files): the resolved configuration, the per-Gaussian features as
//! composited, and the scene they belong to (splats and cameras at training size).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use lsplat_core::{Camera, Config, Gaussians};

use crate::DataError;

use crate::run::{CONFIG_FILE, SUMMARY_FILE, is_finished};

/// Per-Gaussian features `[N, C]`, exactly as composited.
pub const FEATURES_NPY: &str = "features.npy";

/// A run's configuration, features and scene.
pub struct RunInputs {
    /// The run directory.
    pub dir: PathBuf,
    /// Its resolved configuration.
    pub config: Config,
    /// The frozen Gaussians.
    pub gaussians: Gaussians,
    /// Cameras sorted by name, at the training resolution.
    pub cameras: Vec<Camera>,
    /// `[N, C]` features as composited (unit rows for LangSplat V1 runs).
    pub features: Vec<f32>,
    /// Channels C.
    pub channels: usize,
    /// What maps the composited features into the text space, when the run has it
    /// (a LangSplatV2 codebook).
    pub decoder: Option<Decoder>,
}

/// A linear map from composited features to the text space: a pixel's feature is
/// `matrixᵀ · f` (a LangSplatV2 codebook, `[C, D]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Decoder {
    /// `[C, D]`, row-major.
    pub matrix: Vec<f32>,
    /// The text-space width D.
    pub dim: usize,
    /// The file it was read from.
    pub file: PathBuf,
}

/// A run's per-Gaussian features as a model's output files hold them.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFeatures {
    /// `[N, C]` features to composite.
    pub data: Vec<f32>,
    /// Channels C.
    pub channels: usize,
    /// The file they came from (for errors).
    pub file: PathBuf,
    /// Their map to the text space, if any.
    pub decoder: Option<Decoder>,
}

impl RunInputs {
    /// The camera named `name`.
    pub fn camera(&self, name: &str) -> Option<&Camera> {
        self.cameras.iter().find(|c| c.name == name)
    }
}

/// Image sizes `(width, height)` by image name, from a dataset's `masks.parquet`.
pub fn image_sizes(dataset_dir: &Path) -> Result<HashMap<String, (u32, u32)>, DataError> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mp = dataset_dir.join(crate::dataset::MASKS_FILE);
    let file = std::fs::File::open(&mp).map_err(|e| DataError::io(&mp, e))?;
    let err = |e: String| DataError::format(&mp, format!("not a readable Parquet file: {e}"));
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| err(e.to_string()))?;
    let mut sizes = HashMap::new();
    for batch in reader {
        let b = batch.map_err(|e| err(e.to_string()))?;
        let c = crate::dataset::schema::Columns {
            batch: &b,
            path: &mp,
        };
        let (img, h, w) = (c.str("image")?, c.u32("height")?, c.u32("width")?);
        for i in 0..b.num_rows() {
            sizes.insert(img.value(i).to_string(), (w.value(i), h.value(i)));
        }
    }
    Ok(sizes)
}

/// Reads a run directory: `config.toml`, `features.npy`, and the scene the
/// configuration names (the embedded demo is regenerated from its `demo` section).
pub fn load_run(dir: &Path) -> Result<RunInputs, DataError> {
    load_run_with(dir, &|dir, _| read_features_npy(dir))
}

/// [`load_run`] with the per-Gaussian features read by `features` (from the run
/// directory and its configuration: a model with its own output files).
pub fn load_run_with(
    dir: &Path,
    features: &dyn Fn(&Path, &Config) -> Result<RunFeatures, DataError>,
) -> Result<RunInputs, DataError> {
    let cfg_path = dir.join(CONFIG_FILE);
    if !cfg_path.is_file() {
        return Err(DataError::format(
            dir,
            format!("not a run directory (no {CONFIG_FILE})"),
        ));
    }
    if !is_finished(dir) {
        return Err(DataError::format(
            dir,
            format!(
                "holds an unfinished run (no {SUMMARY_FILE}); finish it with `train --resume {}`",
                dir.display()
            ),
        ));
    }
    let config = Config::load(&cfg_path)?;
    let RunFeatures {
        data,
        channels,
        file,
        decoder,
    } = features(dir, &config)?;
    let n = data.len() / channels.max(1);
    if channels == 0 || data.iter().any(|v| !v.is_finite()) {
        return Err(DataError::format(
            &file,
            "no channels, or a value that is not finite",
        ));
    }
    let (gaussians, cameras) = if config.scene.is_demo() {
        let demo = crate::demo::generate(&config.demo, config.scene.level)?;
        (demo.scene.gaussians, demo.scene.cameras)
    } else {
        let sc = &config.scene;
        let need = |p: &Option<PathBuf>, k: &str| {
            p.clone()
                .ok_or_else(|| DataError::format(&cfg_path, format!("`scene.{k}` is missing")))
        };
        let (splats, cams, dataset) = (
            need(&sc.splats, "splats")?,
            need(&sc.cameras, "cameras")?,
            need(&sc.dataset, "dataset")?,
        );
        let ply = crate::ply::read_ply(&splats)?;
        let mut cameras = crate::cameras::load_cameras(&cams)?;
        cameras.sort_by(|a, b| a.name.cmp(&b.name));
        let sizes = image_sizes(&dataset)?;
        for cam in &mut cameras {
            if let Some(&size) = sizes.get(&cam.name) {
                *cam = crate::scene::fit_camera(cam, &cam.name.clone(), size)?;
            }
        }
        (ply.gaussians, cameras)
    };
    if gaussians.len() != n {
        return Err(DataError::format(
            &file,
            format!(
                "{n} feature rows but the scene has {} Gaussians",
                gaussians.len()
            ),
        ));
    }
    Ok(RunInputs {
        dir: dir.to_path_buf(),
        config,
        gaussians,
        cameras,
        features: data,
        channels,
        decoder,
    })
}

/// The features of a run that wrote `features.npy` (`[N, C]`).
pub fn read_features_npy(dir: &Path) -> Result<RunFeatures, DataError> {
    let fp = dir.join(FEATURES_NPY);
    if !fp.exists() {
        let mut levels: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| DataError::io(dir, e))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("level_") && dir.join(n).join(CONFIG_FILE).is_file())
            .collect();
        if !levels.is_empty() {
            levels.sort();
            return Err(DataError::format(
                dir,
                format!(
                    "a run of several levels: pass one level's folder ({})",
                    levels.join(", ")
                ),
            ));
        }
    }
    let arr = crate::npy::read_npy(&fp)?;
    let [_, channels] = arr.shape[..] else {
        return Err(DataError::format(
            &fp,
            format!("shape {:?}; expected [gaussians, channels]", arr.shape),
        ));
    };
    Ok(RunFeatures {
        data: arr.data,
        channels,
        file: fp,
        decoder: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_folders_that_are_not_finished_runs() {
        let dir = std::env::temp_dir().join(format!("lsplat-run-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let msg = |d: &Path| match load_run(d) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{} was read as a finished run", d.display()),
        };
        assert!(msg(&dir).contains("not a run directory"));
        std::fs::write(dir.join(CONFIG_FILE), "").unwrap();
        let m = msg(&dir);
        assert!(
            m.contains("unfinished run") && m.contains("--resume"),
            "{m}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
