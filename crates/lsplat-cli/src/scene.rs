//! Configuration and scene loading.

use std::path::Path;

use anyhow::{Context, Result};
use lsplat_core::Config;
use lsplat_data::SceneData;

use crate::SceneArgs;

/// The embedded demo scene file.
pub const DEMO_SCENE: &str = include_str!("../../../scenes/demo.toml");

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

/// Loads (or generates) the scene the configuration names; for file scenes also
/// returns the input PLY (written back with the learned features).
pub fn load(cfg: &Config) -> Result<(SceneData, Option<lsplat_data::ply::SplatPly>)> {
    if cfg.scene.is_demo() {
        let demo = lsplat_data::demo::generate(&cfg.demo, cfg.scene.level)?;
        return Ok((demo.scene, None));
    }
    let loaded = lsplat_data::scene::load_scene(&cfg.scene)?;
    Ok((loaded.data, Some(loaded.ply)))
}
