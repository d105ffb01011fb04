//! The outputs of a finished run, its default name and the loss summary. (The run
//! directory itself — lock, checkpoints, metrics file, finished marker — is
//! `lsplat_data::run`.)

use std::path::PathBuf;

use anyhow::Result;
use lsplat_data::io::write_npy_f32;
use lsplat_data::run::RunDir;
use lsplat_engine::EvalReport;

/// Default run name: the UTC time, `YYYYMMDD-HHMMSS` (made unique by
/// [`RunDir::create_unique`]).
pub fn default_name() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}{mo:02}{d:02}-{:02}{:02}{:02}",
        s / 3600,
        (s / 60) % 60,
        s % 60
    )
}

/// Folder of the default run directories.
pub fn default_parent() -> PathBuf {
    PathBuf::from("runs")
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

/// Mean loss over a range of steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossWindow {
    /// First step (0-based).
    pub first_step: u64,
    /// Last step (inclusive).
    pub last_step: u64,
    /// Mean loss.
    pub mean: f64,
}

impl LossWindow {
    /// `{"first_step", "last_step", "mean"}`.
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({"first_step": self.first_step, "last_step": self.last_step, "mean": self.mean})
    }
}

/// The first and the last window of `min(100, steps / 2)` steps: they never overlap.
/// `None` for fewer than two steps.
pub fn loss_windows(losses: &[(u64, f32)]) -> Option<(LossWindow, LossWindow)> {
    let w = (losses.len() / 2).min(100);
    if w == 0 {
        return None;
    }
    let window = |r: &[(u64, f32)]| LossWindow {
        first_step: r[0].0,
        last_step: r[r.len() - 1].0,
        mean: r.iter().map(|x| x.1 as f64).sum::<f64>() / r.len() as f64,
    };
    Some((window(&losses[..w]), window(&losses[losses.len() - w..])))
}

/// Everything a finished run writes besides the metrics and checkpoints.
pub struct Outputs<'a> {
    /// Per-Gaussian features `[N, C]`.
    pub features: &'a [f32],
    /// Channels.
    pub channels: usize,
    /// `(step, loss)` of every step of the run (all sessions of it).
    pub losses: &'a [(u64, f32)],
    /// Final evaluation (when `log.eval`).
    pub eval: Option<EvalReport>,
    /// Wall seconds of this session's training loop.
    pub seconds: f64,
    /// Steps this session ran.
    pub session_steps: u64,
    /// Steps of the whole run.
    pub steps: u64,
    /// Backend description.
    pub backend: String,
    /// The input PLY, written back with the features (file scenes).
    pub ply: Option<&'a lsplat_data::ply::SplatPly>,
}

/// Writes `features.npy`, `features.parquet`, `splats.ply` (file scenes), then
/// `summary.json` last (the finished marker), each atomically. Returns the summary.
pub fn write_outputs(run: &RunDir, o: &Outputs<'_>) -> Result<serde_json::Value> {
    let n = o.features.len() / o.channels.max(1);
    write_npy_f32(&run.join("features.npy"), &[n, o.channels], o.features)?;
    lsplat_data::output::write_gaussian_features(
        &run.join("features.parquet"),
        o.features,
        o.channels,
    )?;
    if let Some(ply) = o.ply {
        lsplat_data::output::write_splats_with_features(
            &run.join("splats.ply"),
            ply,
            o.features,
            o.channels,
        )?;
    }
    let windows = loss_windows(o.losses);
    let summary = serde_json::json!({
        "steps": o.steps,
        "session_steps": o.session_steps,
        "seconds": o.seconds,
        "it_per_s": o.session_steps as f64 / o.seconds.max(1e-9),
        "final_loss": o.losses.last().map(|r| r.1),
        "first_loss": o.losses.first().map(|r| r.1),
        "loss_first_window": windows.map(|w| w.0.to_json()),
        "loss_last_window": windows.map(|w| w.1.to_json()),
        "loss_ratio": windows.map(|(a, b)| a.mean / b.mean),
        "eval_mean_cosine": o.eval.map(|e| e.mean_cosine),
        "eval_mean_l1": o.eval.map(|e| e.mean_l1),
        "eval_pixels": o.eval.map(|e| e.pixels),
        "gaussians": n,
        "channels": o.channels,
        "backend": o.backend,
        "peak_rss_bytes": lsplat_engine::systems::checkpoint::peak_resident_bytes(),
    });
    run.finish(serde_json::to_string_pretty(&summary)?.as_bytes())?;
    Ok(summary)
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

    #[test]
    fn loss_windows_never_overlap() {
        let l: Vec<(u64, f32)> = (0..100).map(|s| (s, 100.0 - s as f32)).collect();
        let (a, b) = loss_windows(&l).unwrap();
        assert_eq!(
            (a.first_step, a.last_step, b.first_step, b.last_step),
            (0, 49, 50, 99)
        );
        assert_eq!((a.mean, b.mean), (75.5, 25.5));
        let l: Vec<(u64, f32)> = (0..1000).map(|s| (s, 1.0)).collect();
        let (a, b) = loss_windows(&l).unwrap();
        assert_eq!((a.last_step, b.first_step), (99, 900));
        assert!(loss_windows(&l[..1]).is_none());
        let (a, b) = loss_windows(&l[..3]).unwrap();
        assert_eq!(
            (a.first_step, a.last_step, b.first_step, b.last_step),
            (0, 0, 2, 2)
        );
    }
}
