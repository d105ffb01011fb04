//! `metrics.jsonl`: one JSON object per step (`{"step": s, "loss": l, …}`), appended and
//! flushed every logging window, so a killed run keeps what it logged.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::DataError;

/// The metrics file of a run, open for appending.
#[derive(Debug)]
pub struct MetricsLog {
    path: PathBuf,
    file: File,
}

/// The `step` of a complete metrics line.
fn line_step(line: &str) -> Option<u64> {
    serde_json::from_str::<serde_json::Value>(line)
        .ok()?
        .get("step")?
        .as_u64()
}

impl MetricsLog {
    /// Starts an empty metrics file.
    pub fn create(path: &Path) -> Result<MetricsLog, DataError> {
        crate::io::write_bytes_atomic(path, b"")?;
        MetricsLog::open_append(path)
    }

    /// Continues a metrics file from step `next`: lines of later steps (logged after
    /// the checkpoint being resumed) and a torn last line are dropped first.
    pub fn resume(path: &Path, next: u64) -> Result<MetricsLog, DataError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(DataError::io(path, e)),
        };
        let mut kept = String::new();
        for line in text.split_inclusive('\n') {
            if line.ends_with('\n') && line_step(line).is_some_and(|s| s < next) {
                kept.push_str(line);
            }
        }
        crate::io::write_bytes_atomic(path, kept.as_bytes())?;
        MetricsLog::open_append(path)
    }

    fn open_append(path: &Path) -> Result<MetricsLog, DataError> {
        let file = File::options()
            .append(true)
            .open(path)
            .map_err(|e| DataError::io(path, e))?;
        Ok(MetricsLog {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends whole lines (each ending in `\n`) and flushes them to the file.
    pub fn append(&mut self, lines: &str) -> Result<(), DataError> {
        self.file
            .write_all(lines.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|e| DataError::io(&self.path, e))
    }
}

/// `(step, loss)` of every complete line of a metrics file (a `null` loss — not
/// finite — reads as NaN).
pub fn read_losses(path: &Path) -> Result<Vec<(u64, f32)>, DataError> {
    let text = std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))?;
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| DataError::format(path, format!("line `{line}`: {e}")))?;
        let step = v["step"]
            .as_u64()
            .ok_or_else(|| DataError::format(path, format!("line `{line}` has no step")))?;
        out.push((step, v["loss"].as_f64().map_or(f32::NAN, |l| l as f32)));
    }
    Ok(out)
}
