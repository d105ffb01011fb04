//! The on-disk cache of compiled kernels, shared by every runtime: CUBINs (cuda), code
//! objects (hip) and shared objects (simt) live in `$LSPLAT_KERNEL_CACHE/<runtime>`, else
//! in the user's cache folder (`$XDG_CACHE_HOME` or `~/.cache`, then
//! `lsplat-engine/<runtime>`). Entries are named by a hash of everything that shapes the
//! compiled code (source, flags, compiler version), so a stale entry is never reused;
//! they are written under a unique temporary name and renamed into place, so concurrent
//! builds (parallel tests, several processes) never see a half-written file.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use lsplat_device::Result;

/// The cache folder of `runtime` (`cuda`, `hip`, `simt`).
pub fn dir(runtime: &str) -> PathBuf {
    if let Some(d) = std::env::var_os("LSPLAT_KERNEL_CACHE") {
        return PathBuf::from(d).join(runtime);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("lsplat-engine").join(runtime)
}

/// A stable 64-bit key of everything that shapes a compiled kernel.
pub fn key(parts: impl Hash) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// A temporary name beside `path`, unique to this process and thread.
pub fn temp_path(path: &Path, suffix: &str) -> PathBuf {
    let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    path.with_extension(format!("{tag}.{suffix}"))
}

/// The cached bytes at `path`, or `compile()`'s, which are then stored there (best
/// effort: a cache that cannot be written only costs a recompile next time).
pub fn bytes(path: &Path, compile: impl FnOnce() -> Result<Vec<u8>>) -> Result<Vec<u8>> {
    if let Ok(b) = std::fs::read(path)
        && !b.is_empty()
    {
        return Ok(b);
    }
    let compiled = compile()?;
    if let Some(parent) = path.parent()
        && std::fs::create_dir_all(parent).is_ok()
    {
        let tmp = temp_path(path, "tmp");
        if std::fs::write(&tmp, &compiled).is_ok() && std::fs::rename(&tmp, path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(compiled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_once_then_reads_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("k-0123.bin");
        let mut calls = 0;
        let a = bytes(&path, || {
            calls += 1;
            Ok(vec![1, 2, 3])
        })
        .unwrap();
        let b = bytes(&path, || {
            calls += 1;
            Ok(vec![9])
        })
        .unwrap();
        assert_eq!((a, b, calls), (vec![1, 2, 3], vec![1, 2, 3], 1));
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(left.len(), 1, "temporary files left behind");
    }

    #[test]
    fn keys_differ_with_any_part() {
        assert_ne!(key(("src", ["-DA=1"], 5)), key(("src", ["-DA=2"], 5)));
        assert_eq!(key(("src", 1)), key(("src", 1)));
    }
}
