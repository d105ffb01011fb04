//! The run directory: creation and atomic outputs.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lsplat_data::io::{write_bytes_atomic, write_npy_f32};
use lsplat_engine::{EvalReport, StepRecord};

/// `runs/<UTC timestamp>`.
pub fn default_dir() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    PathBuf::from("runs").join(format!(
        "{y:04}{mo:02}{d:02}-{:02}{:02}{:02}",
        s / 3600,
        (s / 60) % 60,
        s % 60
    ))
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// Resident set size of this process (Linux), read from `/proc/self/status`.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kib| kib * 1024)
}

/// Peak resident set size of this process (Linux).
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kib| kib * 1024)
}

/// Creates the run directory.
pub fn create(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating run directory {}", dir.display()))
}

/// Writes the resolved configuration.
pub fn write_config(dir: &Path, toml: &str) -> Result<()> {
    Ok(write_bytes_atomic(
        &dir.join("config.toml"),
        toml.as_bytes(),
    )?)
}

/// Everything a finished run writes.
pub struct Outputs<'a> {
    /// Per-Gaussian features `[N, C]`.
    pub features: &'a [f32],
    /// Channels.
    pub channels: usize,
    /// Step losses.
    pub records: &'a [StepRecord],
    /// Final evaluation (when `log.eval`).
    pub eval: Option<EvalReport>,
    /// Wall seconds of the training loop.
    pub seconds: f64,
    /// Steps run.
    pub steps: u64,
    /// Backend description.
    pub backend: String,
    /// Cache counters at the end of each logging window.
    pub cache_reports: &'a [(u64, lsplat_engine::resources::CacheStats)],
    /// Resident memory of the process at the end of each logging window.
    pub rss: &'a [(u64, Option<u64>)],
    /// The input PLY, written back with the features (file scenes).
    pub ply: Option<&'a lsplat_data::ply::SplatPly>,
}

/// Writes `features.parquet`, `features.npy`, `splats.ply` (file scenes),
/// `metrics.jsonl` and `summary.json`, each atomically.
pub fn write_outputs(dir: &Path, o: &Outputs<'_>) -> Result<()> {
    let n = o.features.len() / o.channels.max(1);
    write_npy_f32(&dir.join("features.npy"), &[n, o.channels], o.features)?;
    lsplat_data::output::write_gaussian_features(
        &dir.join("features.parquet"),
        o.features,
        o.channels,
    )?;
    if let Some(ply) = o.ply {
        lsplat_data::output::write_splats_with_features(
            &dir.join("splats.ply"),
            ply,
            o.features,
            o.channels,
        )?;
    }
    let mut metrics = String::new();
    let mut reports = o.cache_reports.iter().peekable();
    let mut rss = o.rss.iter().peekable();
    for r in o.records {
        let mut line = serde_json::json!({"step": r.step, "loss": r.loss});
        if let Some((_, c)) = reports.next_if(|(s, _)| *s == r.step) {
            line["cache_hits"] = c.hits.into();
            line["cache_misses"] = c.misses.into();
            line["cache_evictions"] = c.evictions.into();
            line["cache_bytes"] = c.bytes.into();
        }
        if let Some((_, Some(bytes))) = rss.next_if(|(s, _)| *s == r.step) {
            line["rss_bytes"] = (*bytes).into();
        }
        metrics.push_str(&line.to_string());
        metrics.push('\n');
    }
    write_bytes_atomic(&dir.join("metrics.jsonl"), metrics.as_bytes())?;
    let summary = serde_json::json!({
        "steps": o.steps,
        "seconds": o.seconds,
        "it_per_s": o.steps as f64 / o.seconds.max(1e-9),
        "final_loss": o.records.last().map(|r| r.loss),
        "first_loss": o.records.first().map(|r| r.loss),
        "eval_mean_cosine": o.eval.map(|e| e.mean_cosine),
        "eval_mean_l1": o.eval.map(|e| e.mean_l1),
        "eval_pixels": o.eval.map(|e| e.pixels),
        "gaussians": n,
        "channels": o.channels,
        "backend": o.backend,
        "peak_rss_bytes": peak_resident_bytes(),
    });
    write_bytes_atomic(
        &dir.join("summary.json"),
        serde_json::to_string_pretty(&summary)?.as_bytes(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
