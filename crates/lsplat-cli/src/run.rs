//! The outputs of a finished run, its default name and the loss summary. (The run
//! directory itself — lock, checkpoints, metrics file, finished marker — is
//! `lsplat_data::run`.)

use std::path::{Path, PathBuf};

use anyhow::Result;
use lsplat_data::io::{write_bytes_atomic, write_npy_f32};
use lsplat_engine::Quality;
use lsplat_engine::resources::FitReport;

/// Default run name: the UTC time, `YYYYMMDD-HHMMSS` (made unique by
/// [`lsplat_data::run::RunDir::create_unique`]).
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
    /// Final evaluation on the fitted and held-out cameras (when `log.eval`).
    pub quality: Option<Quality>,
    /// `eval.holdout`.
    pub holdout: u32,
    /// How the features were fitted (`adam`, `average`, `lsq`).
    pub solver: &'static str,
    /// The solver's report (solvers only).
    pub fit: Option<&'a FitReport>,
    /// Wall seconds of this session's training loop (or of the solver).
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

/// Writes `features.npy`, `features.parquet` and `splats.ply` (file scenes) into
/// `dir`, each atomically, and returns the summary (the caller writes it last: in the
/// run directory it marks the run finished). The features are what the renderer
/// composites (the Parquet metadata and the PLY header say so).
pub fn write_outputs(dir: &Path, o: &Outputs<'_>) -> Result<serde_json::Value> {
    let n = o.features.len() / o.channels.max(1);
    let note = lsplat_data::output::FEATURES_NOTE;
    write_npy_f32(&dir.join("features.npy"), &[n, o.channels], o.features)?;
    lsplat_data::output::write_gaussian_features(
        &dir.join("features.parquet"),
        o.features,
        o.channels,
        &[("lsplat.features", note), ("lsplat.solver", o.solver)],
    )?;
    if let Some(ply) = o.ply {
        let solver = format!("lsplat solver: {}", o.solver);
        let comments = [&format!("lsplat f_lang_*: {note}")[..], &solver[..]];
        lsplat_data::output::write_splats_with_features(
            &dir.join("splats.ply"),
            ply,
            o.features,
            o.channels,
            &comments,
        )?;
    }
    Ok(summary(o, n, note))
}

/// The fields of `summary.json` every run has, whatever its model: steps, time, the
/// loss windows, the evaluation on the fitted and held-out cameras, the size of what
/// was fitted (`gaussians`, `channels`) and `features` (what the outputs hold).
pub fn summary(o: &Outputs<'_>, gaussians: usize, features: &str) -> serde_json::Value {
    let n = gaussians;
    let note = features;
    let windows = loss_windows(o.losses);
    let fitted = o.quality.map(|q| q.fitted);
    let held = o.quality.and_then(|q| q.held_out);
    let mut summary = serde_json::json!({
        "solver": o.solver,
        "features": note,
        "steps": o.steps,
        "session_steps": o.session_steps,
        "seconds": o.seconds,
        "it_per_s": o.session_steps as f64 / o.seconds.max(1e-9),
        "final_loss": o.losses.last().map(|r| r.1),
        "first_loss": o.losses.first().map(|r| r.1),
        "loss_first_window": windows.map(|w| w.0.to_json()),
        "loss_last_window": windows.map(|w| w.1.to_json()),
        "loss_ratio": windows.map(|(a, b)| a.mean / b.mean),
        "level": o.quality.map(|q| q.level),
        "eval_holdout": o.holdout,
        "eval_mean_cosine": fitted.map(|e| e.mean_cosine),
        "eval_mean_l1": fitted.map(|e| e.mean_l1),
        "eval_pixels": fitted.map(|e| e.pixels),
        "eval_cameras": fitted.map(|e| e.cameras),
        "heldout_mean_cosine": held.map(|e| e.mean_cosine),
        "heldout_mean_l1": held.map(|e| e.mean_l1),
        "heldout_pixels": held.map(|e| e.pixels),
        "heldout_cameras": held.map(|e| e.cameras),
        "gaussians": n,
        "channels": o.channels,
        "backend": o.backend,
        "peak_rss_bytes": lsplat_engine::systems::checkpoint::peak_resident_bytes(),
    });
    if let Some(f) = o.fit {
        let level = o
            .quality
            .and_then(|q| f.levels.iter().position(|&l| l == q.level))
            .unwrap_or(0);
        summary["fit_seconds"] = f.seconds.into();
        summary["levels_solved_together"] = f.levels.clone().into();
        summary["unweighted_gaussians"] = f.unweighted.get(level).copied().into();
        if !f.residuals.is_empty() {
            let history: Vec<f64> = f.residuals.iter().map(|r| r[level]).collect();
            summary["lsq_iterations"] = f.iterations.into();
            summary["lsq_converged"] = f.converged.into();
            summary["lsq_relative_residuals"] = history.into();
            summary["cached_operators"] = f.cached.into();
            summary["streamed_operators"] = f.streamed.into();
        }
    }
    summary
}

/// Writes `summary` as `dir/summary.json`, atomically (per-level folders; the run
/// directory's own goes through [`lsplat_data::run::RunDir::finish`]).
pub fn write_json(dir: &Path, summary: &serde_json::Value) -> Result<()> {
    write_bytes_atomic(
        &dir.join("summary.json"),
        serde_json::to_string_pretty(summary)?.as_bytes(),
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
