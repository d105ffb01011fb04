//! Configuration and scene loading.

use std::path::Path;

use anyhow::{Context, Result};
use lsplat_core::Config;

use crate::SceneArgs;

/// The embedded demo scene file.
pub use lsplat_data::demo::DEMO_SCENE;

/// Defaults ← scene file (or the embedded demo) ← `--set` overrides.
pub fn config(args: &SceneArgs) -> Result<Config> {
    let mut cfg = match &args.scene {
        Some(path) => Config::load(path)?,
        None => Config::from_toml(DEMO_SCENE, Path::new("<embedded demo scene>"))?,
    };
    for s in &args.set {
        cfg.set(s).with_context(|| format!("--set {s}"))?;
    }
    // Paths given with --set are relative to the working directory.
    cfg.resolve_paths(Path::new("."));
    cfg.validate()?;
    Ok(cfg)
}

/// A loaded scene (see [`lsplat_data::scene::load_configured`]).
pub type Loaded = lsplat_data::scene::Configured;

/// Loads (or generates) the scene the configuration names, with every level of
/// `solve.levels` (each file is read once).
pub fn load(cfg: &Config) -> Result<Loaded> {
    Ok(lsplat_data::scene::load_configured(cfg)?)
}
