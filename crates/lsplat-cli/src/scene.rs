//! Configuration and scene loading.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lsplat_core::Config;

use crate::SceneArgs;

/// The embedded demo scene file.
pub use lsplat_data::demo::DEMO_SCENE;

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

/// Opens `cfg.device`; `auto` is replaced by the backend it chose (so a run records,
/// and a resumed run reopens, the backend that computed it), and the choice is
/// printed with its reason.
pub fn open_device(cfg: &mut Config) -> Result<lsplat_render::Device> {
    let (dev, kind, why) = lsplat_render::Device::open_reporting(&cfg.device, &cfg.simt)?;
    if let Some(why) = why {
        tracing::info!("device.backend = auto: {} ({why})", kind.name());
        cfg.device.backend = kind;
    }
    Ok(dev)
}

/// A loaded scene (see [`lsplat_data::scene::load_configured`]).
pub type Loaded = lsplat_data::scene::Configured;

/// Loads (or generates) the scene the configuration names, with every level of
/// `solve.levels` (each file is read once).
pub fn load(cfg: &Config) -> Result<Loaded> {
    Ok(lsplat_data::scene::load_configured(cfg)?)
}
