//! Atomic file output: write to a temporary file beside the target, then rename.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::DataError;

/// Writes `path` atomically: the bytes produced by `fill` go to a temporary file in
/// the same folder, which is flushed, synced and renamed over `path`. On any error the
/// temporary file is removed and `path` is untouched.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), DataError> {
    let tmp = temp_path(path);
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        DataError::io(path, e)
    })
}

/// Writes bytes atomically.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<(), DataError> {
    write_atomic(path, |w| w.write_all(bytes))
}

/// A temporary name beside `path`, unique to this process and call:
/// `.<name>.<pid>.<n>.tmp`. Hidden and ending in `.tmp`, so a file left by a killed
/// writer never looks like a finished output.
fn temp_path(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// True for a temporary name made by this module (`.<name>.….tmp`).
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Writes a float32 array as a `.npy` file (little-endian, C order) atomically.
pub fn write_npy_f32(path: &Path, shape: &[usize], data: &[f32]) -> Result<(), DataError> {
    assert_eq!(
        shape.iter().product::<usize>(),
        data.len(),
        "npy shape does not match data"
    );
    let header = crate::npy::npy_header("<f4", shape);
    write_atomic(path, |w| {
        w.write_all(&header)?;
        for v in data {
            w.write_all(&v.to_le_bytes())?;
        }
        Ok(())
    })
}

/// An output file written under a temporary name beside its target and renamed into
/// place by [`AtomicTarget::commit`]. Dropped without a commit, the temporary file is
/// removed and the target is untouched. For writers that must own their file (e.g.
/// Parquet) or that keep several outputs open.
#[derive(Debug)]
pub struct AtomicTarget {
    path: PathBuf,
    tmp: PathBuf,
    committed: bool,
}

impl AtomicTarget {
    /// Creates the temporary file for `path`.
    pub fn create(path: &Path) -> Result<(AtomicTarget, std::fs::File), DataError> {
        let tmp = temp_path(path);
        let file = std::fs::File::create(&tmp).map_err(|e| DataError::io(path, e))?;
        Ok((
            AtomicTarget {
                path: path.to_path_buf(),
                tmp,
                committed: false,
            },
            file,
        ))
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Syncs `file` (the one returned by [`AtomicTarget::create`]) and renames it over
    /// the target.
    pub fn commit(mut self, file: std::fs::File) -> Result<(), DataError> {
        file.sync_all().map_err(|e| DataError::io(&self.path, e))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path).map_err(|e| DataError::io(&self.path, e))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for AtomicTarget {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.bin");
        std::fs::write(&p, b"old").unwrap();
        let r = write_atomic(&p, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("boom"))
        });
        assert!(r.unwrap_err().to_string().contains("out.bin"));
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "temp file removed"
        );
        write_bytes_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
    }

    #[test]
    fn atomic_target_commits_or_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        let (t, mut f) = AtomicTarget::create(&p).unwrap();
        f.write_all(b"abc").unwrap();
        drop((t, f));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let (t, mut f) = AtomicTarget::create(&p).unwrap();
        f.write_all(b"abc").unwrap();
        assert!(!p.exists());
        t.commit(f).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn temp_names_are_unique_and_hidden() {
        let p = Path::new("/x/features.parquet");
        let (a, b) = (temp_path(p), temp_path(p));
        assert_ne!(a, b);
        for t in [a, b] {
            let name = t.file_name().unwrap().to_str().unwrap().to_string();
            assert!(
                is_temp_name(&name) && name.starts_with(".features.parquet."),
                "{name}"
            );
            assert_eq!(t.parent(), p.parent());
        }
    }

    #[test]
    fn npy_header_is_aligned() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        write_npy_f32(&p, &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let b = std::fs::read(&p).unwrap();
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        assert_eq!(b.len(), 10 + hlen + 24);
        assert!(
            std::str::from_utf8(&b[10..10 + hlen])
                .unwrap()
                .contains("'shape': (2, 3)")
        );
    }
}
