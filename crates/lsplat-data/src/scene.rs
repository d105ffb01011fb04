//! Loading a training scene from the files a scene configuration names.

use std::path::Path;

use lsplat_core::Config;
use lsplat_core::config::SceneConfig;

use crate::{DataError, ImageLabels, SceneData};

/// The splats, cameras and per-image labels of the scene, plus the PLY as read
/// (colours and extra properties, for writing the output PLY).
pub struct LoadedScene {
    /// Training data.
    pub data: SceneData,
    /// The input PLY.
    pub ply: crate::ply::SplatPly,
    /// Labels of the further levels asked for (`[level][camera]`), after `data`'s.
    pub more_levels: Vec<Vec<ImageLabels>>,
}

fn required<'a>(p: &'a Option<std::path::PathBuf>, key: &str) -> Result<&'a Path, DataError> {
    p.as_deref().ok_or_else(|| {
        DataError::Scene(format!(
            "`scene.{key}` is required when any scene file is given"
        ))
    })
}

/// Loads the scene: the PLY, the cameras (any supported format), and the labels of
/// `scene.level` from the dataset, matched to the cameras by image stem. A camera whose
/// size differs from its labels' (a downscaled image set, LangSplat's height-1080
/// rule) is rescaled to the labels' size, which is the training resolution.
pub fn load_scene(scene: &SceneConfig) -> Result<LoadedScene, DataError> {
    load_scene_levels(scene, &[scene.level])
}

/// [`load_scene`] for several levels at once (each file is read once): `data` holds
/// the labels of `levels[0]`, `more_levels` those of the others, in order.
pub fn load_scene_levels(scene: &SceneConfig, levels: &[u8]) -> Result<LoadedScene, DataError> {
    if levels.is_empty() {
        return Err(DataError::Scene("no level to load".into()));
    }
    let splats = required(&scene.splats, "splats")?;
    let cams_path = required(&scene.cameras, "cameras")?;
    let dataset = required(&scene.dataset, "dataset")?;
    let ply = crate::ply::read_ply(splats)?;
    let mut cameras = crate::cameras::load_cameras(cams_path)?;
    cameras.sort_by(|a, b| a.name.cmp(&b.name));
    let mut all = labels_for_cameras(&mut cameras, dataset, levels)?;
    let labels = all.remove(0);
    let data = SceneData {
        gaussians: ply.gaussians.clone(),
        cameras,
        labels,
    };
    data.validate()?;
    for more in &all {
        data.validate_level(more)?;
    }
    Ok(LoadedScene {
        data,
        ply,
        more_levels: all,
    })
}

/// The labels of `levels` (`[level][camera]`) of `cameras` from a dataset folder,
/// matched by image name; each camera is rescaled to its labels' size (see
/// [`fit_camera`]).
pub fn labels_for_cameras(
    cameras: &mut [lsplat_core::Camera],
    dataset: &Path,
    levels: &[u8],
) -> Result<Vec<Vec<ImageLabels>>, DataError> {
    let names: Vec<String> = cameras.iter().map(|c| c.name.clone()).collect();
    let all = crate::dataset::load_dataset_levels(dataset, levels, &names)?;
    if let Some(first) = all.first() {
        for (cam, lab) in cameras.iter_mut().zip(first) {
            *cam = fit_camera(cam, &lab.name, (lab.width, lab.height))?;
        }
    }
    Ok(all)
}

/// The scene a configuration names, with every level of `solve.levels` (the labels of
/// the first level in `data`, the others in `more_levels`): the files of `[scene]`
/// (each read once), or the embedded demo generated from `[demo]`.
pub struct Configured {
    /// Gaussians, cameras, labels of the first level.
    pub data: SceneData,
    /// Labels of the other levels, `[level][camera]`.
    pub more_levels: Vec<Vec<ImageLabels>>,
    /// The input PLY (file scenes), written back with learned features.
    pub ply: Option<crate::ply::SplatPly>,
}

/// Loads (or generates) the scene `cfg` names, with the levels `solve.levels` asks for
/// (default `scene.level`).
pub fn load_configured(cfg: &Config) -> Result<Configured, DataError> {
    let levels = cfg.solve.levels_or(cfg.scene.level);
    if cfg.scene.is_demo() {
        let demo = crate::demo::generate(&cfg.demo, levels[0])?;
        let more_levels = levels[1..]
            .iter()
            .map(|&l| demo.labels(l))
            .collect::<Result<_, _>>()?;
        return Ok(Configured {
            data: demo.scene,
            more_levels,
            ply: None,
        });
    }
    let loaded = load_scene_levels(&cfg.scene, &levels)?;
    Ok(Configured {
        data: loaded.data,
        more_levels: loaded.more_levels,
        ply: Some(loaded.ply),
    })
}

/// `cam` at the size of its labels (`image`'s map): unchanged when the sizes agree,
/// rescaled when they differ (a downscaled image set, LangSplat's height-1080 rule); an
/// error when the aspect ratios differ by more than 2%.
pub fn fit_camera(
    cam: &lsplat_core::Camera,
    image: &str,
    (width, height): (u32, u32),
) -> Result<lsplat_core::Camera, DataError> {
    if (cam.width, cam.height) == (width, height) {
        return Ok(cam.clone());
    }
    let (ax, ay) = (
        width as f64 / cam.width as f64,
        height as f64 / cam.height as f64,
    );
    if (ax / ay - 1.0).abs() > 0.02 {
        return Err(DataError::Labels {
            image: image.to_string(),
            problem: format!(
                "labels are {width}x{height} but camera `{}` is {}x{}: the aspect ratios differ",
                cam.name, cam.width, cam.height
            ),
        });
    }
    Ok(cam.rescaled(width, height))
}
