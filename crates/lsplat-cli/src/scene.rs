//! Configuration and scene loading.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lsplat_core::Config;
use lsplat_data::SceneData;

use crate::SceneArgs;

/// The embedded demo scene file.
pub const DEMO_SCENE: &str = include_str!("../../../scenes/demo.toml");

/// Defaults ← scene file (or the embedded demo) ← `--set` overrides.
pub fn config(args: &SceneArgs) -> Result<Config> {
    Ok(resolve(args)?.cfg)
}

/// A resolved configuration, and the LangSplat folders its scene came from.
pub struct Resolved {
    /// The configuration.
    pub cfg: Config,
    /// What `-s`/`-m` found, when given.
    pub found: Option<crate::folders::Found>,
}

impl Resolved {
    /// The run directory when no `--out` is given: `MODEL_<level>` for folder scenes.
    pub fn default_out(&self) -> Option<PathBuf> {
        let f = self.found.as_ref()?;
        let levels = self.cfg.solve.levels_or(self.cfg.scene.level);
        Some(crate::folders::run_dir(&f.model, &levels))
    }

    /// The scene file a folder scene's run writes (`scene.toml`).
    pub fn scene_file(&self) -> Option<String> {
        Some(self.found.as_ref()?.scene_toml(self.cfg.scene.level))
    }
}

/// Defaults ← scene file, LangSplat folders (`-s`/`-m`, with the dataset imported on
/// first use) or the embedded demo ← `--set` overrides.
pub fn resolve(args: &SceneArgs) -> Result<Resolved> {
    let folders = args.folders.given();
    let mut cfg = match &args.scene {
        Some(path) => Config::load(path)?,
        None if folders => Config::default(),
        None => Config::from_toml(DEMO_SCENE, Path::new("<embedded demo scene>"))?,
    };
    for s in &args.set {
        cfg.set(s).with_context(|| format!("--set {s}"))?;
    }
    // Paths given with --set are relative to the working directory.
    cfg.resolve_paths(Path::new("."));
    cfg.validate()?;
    let found = if folders {
        let found = crate::folders::apply(&args.folders, &mut cfg)?;
        cfg.validate()?;
        println!("{}", found.describe(cfg.scene.level));
        Some(found)
    } else {
        None
    };
    Ok(Resolved { cfg, found })
}

/// A loaded scene: the data of the first level, the labels of the further levels a
/// solver fits (`solve.levels`), and for file scenes the input PLY (written back with
/// the learned features).
pub struct Loaded {
    /// Gaussians, cameras, labels of the first level.
    pub data: SceneData,
    /// Labels of the other levels, `[level][camera]`.
    pub more_levels: Vec<Vec<lsplat_data::ImageLabels>>,
    /// The input PLY (file scenes).
    pub ply: Option<lsplat_data::ply::SplatPly>,
}

/// Loads (or generates) the scene the configuration names, with every level of
/// `solve.levels` (each file is read once).
pub fn load(cfg: &Config) -> Result<Loaded> {
    let levels = cfg.solve.levels_or(cfg.scene.level);
    if cfg.scene.is_demo() {
        let demo = lsplat_data::demo::generate(&cfg.demo, levels[0])?;
        let more_levels = levels[1..]
            .iter()
            .map(|&l| demo.labels(l))
            .collect::<Result<_, _>>()?;
        return Ok(Loaded {
            data: demo.scene,
            more_levels,
            ply: None,
        });
    }
    let loaded = lsplat_data::scene::load_scene_levels(&cfg.scene, &levels)?;
    Ok(Loaded {
        data: loaded.data,
        more_levels: loaded.more_levels,
        ply: Some(loaded.ply),
    })
}
