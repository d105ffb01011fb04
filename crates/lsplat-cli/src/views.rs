//! Helpers of `render`, `query` and `eval`: camera selection, opening a
//! run on its device. Rendering whole images band by band is `lsplat_render::views`.

use anyhow::{Context, Result, bail};
use lsplat_core::Camera;
use lsplat_core::config::BackendKind;
pub use lsplat_render::views::{Band, Views};

/// Bytes of host memory one whole image of `cam` holds while it is rendered and
/// written, besides the bounded bands: the picture (3 B per pixel), `maps` float maps
/// of the image (query relevancy), and the tile lists (offsets and counts, 16 B per
/// tile).
pub fn image_bytes(cam: &Camera, tile: u32, maps: u64) -> Option<u64> {
    let pixels = cam.width as u64 * cam.height as u64;
    let tiles =
        (cam.width as u64).div_ceil(tile as u64) * (cam.height as u64).div_ceil(tile as u64);
    pixels
        .checked_mul(3 + 4 * maps)?
        .checked_add(tiles.checked_mul(16)?)
}

/// Refuses, before anything is rendered or written, a camera whose image cannot fit
/// in memory: the error gives the estimate and the memory available (the images'
/// sizes come from the run's dataset header).
pub fn check_image_memory(cams: &[&Camera], maps: usize) -> Result<()> {
    for cam in cams {
        let what = format!(
            "rendering camera `{}` ({}×{} pixels)",
            cam.name, cam.width, cam.height
        );
        match image_bytes(
            cam,
            lsplat_core::constants::SUPPORTED_TILE_SIZES[0],
            maps as u64,
        ) {
            Some(b) => {
                lsplat_core::memory::check_fits(&what, b, 1)?;
            }
            None => {
                lsplat_core::memory::check_fits(&what, u64::MAX, 2)?;
            }
        }
    }
    Ok(())
}

/// Parses a `--backend` value.
pub fn backend_kind(name: &str) -> Result<BackendKind> {
    Ok(match name {
        "cpu" => BackendKind::Cpu,
        "simt" => BackendKind::Simt,
        "cuda" => BackendKind::Cuda,
        "hip" => BackendKind::Hip,
        "auto" => BackendKind::Auto,
        other => bail!("--backend {other}: expected auto, cpu, simt, cuda or hip"),
    })
}

/// The cameras named in `names` (all when empty), in the run's order; an unknown name
/// is an error listing the cameras.
pub fn pick_cameras<'c>(cameras: &'c [Camera], names: &[String]) -> Result<Vec<&'c Camera>> {
    if names.is_empty() {
        return Ok(cameras.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            cameras.iter().find(|c| &c.name == n).with_context(|| {
                let all: Vec<&str> = cameras.iter().take(20).map(|c| c.name.as_str()).collect();
                format!(
                    "no camera `{n}` in the run (cameras: {}{})",
                    all.join(", "),
                    if cameras.len() > 20 { ", …" } else { "" }
                )
            })
        })
        .collect()
}

/// A file-name-safe form of a phrase (`coffee mug` → `coffee_mug`).
pub fn file_stem(s: &str) -> String {
    let stem: String = s
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // File names are at most 255 bytes: a long phrase keeps its first 100 bytes and
    // gets a hash of the whole phrase, so two long phrases still differ.
    if stem.len() <= 120 {
        return stem;
    }
    let mut cut = 100;
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{}-{h:016x}", &stem[..cut])
}

/// A run with the device it renders on: the run's configured backend, or `backend`.
pub fn open_run(
    dir: &std::path::Path,
    backend: Option<&str>,
) -> Result<(lsplat_data::run_dir::RunInputs, lsplat_render::Device)> {
    let mut run = crate::plugins::load_run(dir)?;
    if let Some(b) = backend {
        run.config.device.backend = backend_kind(b)?;
    }
    let dev = crate::scene::open_device(&mut run.config)?;
    Ok((run, dev))
}
