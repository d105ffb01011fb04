//! Start-up checks of a data-parallel job: every rank must run the same binary on the
//! same configuration and scene, or the job stops at once saying what differs.

use std::hash::Hasher;

use anyhow::{Context, Result};
use lsplat_core::Config;
use lsplat_data::SceneData;
use lsplat_dist::{Comm, Fnv64, agree};

/// The configuration's hash, without the keys that may differ per rank (which device
/// and how many threads a rank uses).
fn config_hash(cfg: &Config) -> u64 {
    let mut c = cfg.clone();
    c.device.ordinal = 0;
    c.device.threads = 0;
    lsplat_dist::fnv64(c.to_toml().as_bytes())
}

/// Every rank holds the same configuration (and the same binary).
pub fn agree_on_config(comm: &dyn Comm, cfg: &Config) -> Result<()> {
    let exe = std::env::current_exe().context("finding this binary to compare across ranks")?;
    let bytes = std::fs::read(&exe).with_context(|| format!("reading {}", exe.display()))?;
    agree(
        comm,
        "the lsplat-engine binary (rebuild or copy the same one to every node)",
        lsplat_dist::fnv64(&bytes),
    )?;
    agree(
        comm,
        "the configuration (scene file or --set overrides)",
        config_hash(cfg),
    )?;
    Ok(())
}

/// A fingerprint of everything a step reads: geometry, cameras, labels.
pub fn scene_hash(data: &SceneData) -> u64 {
    let mut h = Fnv64::default();
    let g = &data.gaussians;
    h.write_usize(g.len());
    let floats = g.means.iter().flatten();
    let floats = floats.chain(g.log_scales.iter().flatten());
    let floats = floats.chain(g.rotations.iter().flatten());
    for x in floats.chain(&g.opacity_logits) {
        h.write_u32(x.to_bits());
    }
    for (cam, l) in data.cameras.iter().zip(&data.labels) {
        h.write(cam.name.as_bytes());
        for v in [cam.fx, cam.fy, cam.cx, cam.cy] {
            h.write_u32(v.to_bits());
        }
        for v in cam.camera_from_world().to_cols_array() {
            h.write_u32(v.to_bits());
        }
        h.write_u32(l.width);
        h.write_u32(l.height);
        h.write_usize(l.dim);
        l.valid.iter().for_each(|&v| h.write_u32(v));
        l.mask.iter().for_each(|&v| h.write_u32(v));
        l.features.iter().for_each(|v| h.write_u32(v.to_bits()));
    }
    h.finish()
}

/// Every rank loaded the same scene.
pub fn agree_on_inputs(comm: &dyn Comm, data: &SceneData) -> Result<()> {
    agree(
        comm,
        "the scene (splats, cameras or dataset differ between the ranks' files)",
        scene_hash(data),
    )?;
    Ok(())
}
