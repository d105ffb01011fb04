//! The run directory: one run owns it, from creation to its finished marker.
//!
//! ```text
//! <run>/.lock                 held (flock) by the process that owns the run
//!       config.toml           the resolved configuration (written first)
//!       metrics.jsonl         one line per step, appended every logging window
//!       checkpoints/step-<9 digits>.safetensors   the newest few checkpoints
//!       features.npy  features.parquet  splats.ply   outputs, at the end
//!       summary.json          written last: its presence marks a finished run
//! ```
//!
//! Every file is written atomically (a unique hidden temporary name in the same folder,
//! fsync, rename), so a killed run leaves complete files or hidden `.….tmp` files,
//! which the next owner removes. A directory is *locked* while a process holds
//! `.lock`: a second run into it fails at once. A *finished* directory is refused
//! unless the caller overwrites it (`--force`); an unfinished one is continued with
//! [`RunDir::resume`] or discarded with `--force`. Only rank 0 of a distributed run
//! owns the directory.

pub mod checkpoint;
pub mod identity;
pub mod layout;
pub mod metrics;
pub mod resume;

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::DataError;
use crate::io::is_temp_name;
pub use layout::Layout;

pub use checkpoint::{
    Checkpoint, Extra, checkpoint_name, list_checkpoints, newest_checkpoint, prune_checkpoints,
    save_checkpoint,
};
pub use metrics::{MetricsLog, read_losses};

/// The lock file inside a run directory.
pub const LOCK_FILE: &str = ".lock";
/// The resolved configuration.
pub const CONFIG_FILE: &str = "config.toml";
/// The scene found in LangSplat's folders (`-s`/`-m` runs), as an editable scene file.
pub const SCENE_FILE: &str = "scene.toml";
/// Step metrics, one JSON object per line.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// The run summary, written last: the finished marker.
pub const SUMMARY_FILE: &str = "summary.json";
/// The checkpoint folder.
pub const CHECKPOINT_DIR: &str = "checkpoints";
/// Every file name a run writes at its top level (what `--force` may remove).
pub const RUN_FILES: &[&str] = &[
    CONFIG_FILE,
    SCENE_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
    "features.npy",
    "features.parquet",
    "splats.ply",
];

/// A run directory owned by this process (its lock is held until drop).
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    _lock: File,
}

fn run_err(path: &Path, problem: impl Into<String>) -> DataError {
    DataError::format(path, problem)
}

/// Takes the directory's lock, or fails at once when another process holds it.
fn lock(dir: &Path) -> Result<File, DataError> {
    let lock_path = dir.join(LOCK_FILE);
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| DataError::io(&lock_path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(run_err(
            dir,
            "the run directory is in use by another run (it holds the lock on .lock)",
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(DataError::io(&lock_path, e)),
    }
}

/// What an existing directory holds.
#[derive(Debug, Default)]
struct Contents {
    /// Names the command writes (top-level files and folders, temporary files).
    owned: Vec<PathBuf>,
    /// Anything else.
    foreign: Vec<String>,
}

fn contents(dir: &Path, layout: &Layout) -> Result<Contents, DataError> {
    let mut c = Contents::default();
    let entries = std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))?;
    for e in entries {
        let e = e.map_err(|e| DataError::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name == LOCK_FILE {
            continue;
        }
        let is_dir = e
            .file_type()
            .map_err(|err| DataError::io(e.path(), err))?
            .is_dir();
        if layout.owns(&name, is_dir) {
            c.owned.push(e.path());
        } else {
            c.foreign.push(name);
        }
    }
    c.foreign.sort();
    Ok(c)
}

/// Removes what the command wrote (only the names it writes; a folder only if it
/// holds nothing else).
fn clear(dir: &Path, owned: &[PathBuf], layout: &Layout) -> Result<(), DataError> {
    // Check every folder first, so a refusal leaves everything in place.
    for p in owned.iter().filter(|p| p.is_dir()) {
        let entries = std::fs::read_dir(p).map_err(|e| DataError::io(p, e))?;
        for e in entries {
            let e = e.map_err(|e| DataError::io(p, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() || !layout.owns_inner(&name) {
                let folder = p
                    .file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into_owned());
                return Err(run_err(
                    dir,
                    format!(
                        "{folder}/{name} is not something a {} writes; remove it by hand",
                        layout.kind
                    ),
                ));
            }
        }
    }
    for p in owned {
        let r = if p.is_dir() {
            std::fs::remove_dir_all(p)
        } else {
            std::fs::remove_file(p)
        };
        match r {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(DataError::io(p, e));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Removes temporary files a killed writer left (the caller holds the lock).
fn remove_stale_temps(dir: &Path) -> Result<(), DataError> {
    for d in [dir.to_path_buf(), dir.join(CHECKPOINT_DIR)] {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if is_temp_name(&e.file_name().to_string_lossy()) {
                std::fs::remove_file(e.path()).map_err(|err| DataError::io(e.path(), err))?;
            }
        }
    }
    Ok(())
}

/// The `status` a summary records: `finished`, or `interrupted` (a run stopped by a
/// signal after writing a checkpoint).
pub const STATUS_INTERRUPTED: &str = "interrupted";

/// True when `dir` holds a finished run: its [`SUMMARY_FILE`] exists and does not
/// mark the run interrupted.
pub fn is_finished(dir: &Path) -> bool {
    dir.join(SUMMARY_FILE).is_file() && interrupted_at(dir).is_none()
}

/// The step after which a run was interrupted (its summary says `"status":
/// "interrupted"`), if it was.
pub fn interrupted_at(dir: &Path) -> Option<u64> {
    let text = std::fs::read(dir.join(SUMMARY_FILE)).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    (v.get("status")?.as_str()? == STATUS_INTERRUPTED).then(|| v["steps"].as_u64().unwrap_or(0))
}

/// Why `dir` cannot be taken for a new output of `layout` without `--force` (or at
/// all), or `Ok(())` when it can. Looks only; nothing is created or removed.
pub fn check_available(dir: &Path, force: bool, layout: &Layout) -> Result<(), DataError> {
    if dir.exists() && !dir.is_dir() {
        return Err(run_err(
            dir,
            format!(
                "is a file, not a folder; choose another output folder for the {}",
                layout.kind
            ),
        ));
    }
    if !dir.is_dir() {
        return Ok(());
    }
    // A run in progress: its lock is held (tried and released at once).
    let lock_path = dir.join(LOCK_FILE);
    if lock_path.is_file() {
        drop(lock(dir)?);
    }
    let c = contents(dir, layout)?;
    refusal(dir, &c, force, layout)
}

/// The error for a folder holding something (foreign content, a finished or
/// resumable output) that `force` does not allow to replace.
fn refusal(dir: &Path, c: &Contents, force: bool, layout: &Layout) -> Result<(), DataError> {
    if !c.foreign.is_empty() {
        return Err(run_err(
            dir,
            format!(
                "not empty and not a {} directory (it holds {}); choose another output folder",
                layout.kind,
                c.foreign
                    .iter()
                    .take(5)
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if c.owned.is_empty() || force {
        return Ok(());
    }
    if is_finished(dir) {
        return Err(run_err(
            dir,
            format!(
                "holds a finished {}; pass --force to overwrite it, or choose another output folder",
                layout.kind
            ),
        ));
    }
    if !layout.resumable {
        return Err(run_err(
            dir,
            format!(
                "holds an unfinished {} (no {SUMMARY_FILE}: it was interrupted); pass --force to overwrite it",
                layout.kind
            ),
        ));
    }
    match newest_checkpoint(dir)? {
        Some((step, _)) => Err(run_err(
            dir,
            format!(
                "holds an {} run (newest checkpoint after step {step}); continue it with `train --resume {}`, or pass --force to discard it",
                if interrupted_at(dir).is_some() {
                    "interrupted"
                } else {
                    "unfinished"
                },
                dir.display()
            ),
        )),
        // Nothing to resume: the folder does not block a new run.
        None => Ok(()),
    }
}

impl RunDir {
    /// Creates (or takes over) `dir` for a new run and locks it.
    ///
    /// A missing or empty directory is used as is. A locked one is refused. A finished
    /// run, or an unfinished one with a checkpoint (it may be resumed), is refused
    /// unless `force`, which removes the files the old run wrote; an unfinished run
    /// without a checkpoint holds nothing to resume and is replaced. A directory
    /// holding anything a run does not write is refused even with `force`.
    pub fn create(dir: &Path, force: bool) -> Result<RunDir, DataError> {
        RunDir::create_as(dir, force, &layout::RUN)
    }

    /// [`RunDir::create`] for the output folder of another command (`layout` names
    /// what it writes): its finished marker is [`SUMMARY_FILE`] too, and an
    /// unfinished one is refused unless `force`.
    pub fn create_as(dir: &Path, force: bool, layout: &Layout) -> Result<RunDir, DataError> {
        check_available(dir, force, layout)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| DataError::io(parent, e))?;
        }
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => return Err(DataError::io(dir, e)),
        }
        let lock = lock(dir)?;
        // Checked again under the lock: another process may have written since.
        let c = contents(dir, layout)?;
        refusal(dir, &c, force, layout)?;
        if !c.owned.is_empty() {
            // The finished marker goes first: a half-cleared directory never looks
            // finished.
            let s = dir.join(SUMMARY_FILE);
            if s.is_file() {
                std::fs::remove_file(&s).map_err(|e| DataError::io(&s, e))?;
            }
            clear(dir, &c.owned, layout)?;
        }
        Ok(RunDir {
            path: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// Creates a new directory `parent/<stem>` — or `<stem>-2`, `<stem>-3`, … when that
    /// name exists (two runs started in the same second) — and locks it. Creating the
    /// directory is the atomic step, so concurrent callers never share one.
    pub fn create_unique(parent: &Path, stem: &str) -> Result<RunDir, DataError> {
        std::fs::create_dir_all(parent).map_err(|e| DataError::io(parent, e))?;
        for k in 1..10_000u32 {
            let dir = if k == 1 {
                parent.join(stem)
            } else {
                parent.join(format!("{stem}-{k}"))
            };
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    let lock = lock(&dir)?;
                    return Ok(RunDir {
                        path: dir,
                        _lock: lock,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(DataError::io(&dir, e)),
            }
        }
        Err(run_err(parent, format!("no free run name `{stem}-N`")))
    }

    /// Takes over an existing run directory to continue it: locks it (refused when
    /// another process holds it) and removes temporary files a killed run left.
    pub fn resume(dir: &Path) -> Result<RunDir, DataError> {
        if !dir.is_dir() {
            return Err(run_err(dir, "no such run directory"));
        }
        let lock = lock(dir)?;
        remove_stale_temps(dir)?;
        Ok(RunDir {
            path: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The checkpoint folder.
    pub fn checkpoints(&self) -> PathBuf {
        self.path.join(CHECKPOINT_DIR)
    }

    /// Writes the resolved configuration.
    pub fn write_config(&self, toml: &str) -> Result<(), DataError> {
        crate::io::write_bytes_atomic(&self.join(CONFIG_FILE), toml.as_bytes())
    }

    /// Removes the finished marker (a finished run being continued further).
    pub fn unfinish(&self) -> Result<(), DataError> {
        let s = self.join(SUMMARY_FILE);
        match std::fs::remove_file(&s) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(DataError::io(&s, e)),
            _ => Ok(()),
        }
    }

    /// Writes the summary, the last file of a run: the directory is then finished.
    pub fn finish(&self, summary: &[u8]) -> Result<(), DataError> {
        crate::io::write_bytes_atomic(&self.join(SUMMARY_FILE), summary)
    }
}

#[cfg(test)]
mod resume_tests;
#[cfg(test)]
mod tests;
