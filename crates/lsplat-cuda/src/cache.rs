//! CUBINs per (kernel, defines, arch): compiled with NVRTC, optionally kept on disk
//! in `$LSPLAT_KERNEL_CACHE` (a directory) so later processes skip compilation.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use lsplat_device::DeviceError;
use lsplat_kernels::Kernel;

use crate::nvrtc;

/// The CUBIN of `kernel` for `(tile, channels, arch, fmad)`.
pub(crate) fn cubin(
    kernel: Kernel,
    tile: u32,
    channels: u32,
    arch: &str,
    fmad: bool,
) -> Result<Vec<u8>, DeviceError> {
    let path = disk_path(kernel, tile, channels, arch, fmad);
    if let Some(p) = &path
        && let Ok(bytes) = std::fs::read(p)
        && !bytes.is_empty()
    {
        return Ok(bytes);
    }
    let compiled = nvrtc::compile(kernel, tile, channels, arch, fmad)?;
    if let Some(p) = &path {
        // Best effort: write to a temporary name, then rename (atomic).
        let tmp = p.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &compiled.cubin).is_ok() {
            let _ = std::fs::rename(&tmp, p);
        }
    }
    Ok(compiled.cubin)
}

fn disk_path(kernel: Kernel, tile: u32, channels: u32, arch: &str, fmad: bool) -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("LSPLAT_KERNEL_CACHE")?);
    std::fs::create_dir_all(&dir).ok()?;
    let version = nvrtc::nvrtc_version().ok()?;
    let mut h = std::hash::DefaultHasher::new();
    (
        kernel.source(),
        nvrtc::flags(tile, channels, arch, fmad),
        version,
    )
        .hash(&mut h);
    Some(dir.join(format!(
        "{}-{arch}-t{tile}-c{channels}-{:016x}.cubin",
        kernel.file_name().trim_end_matches(".cu"),
        h.finish()
    )))
}
