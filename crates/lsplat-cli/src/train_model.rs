//! `train` of a plugin's model (`train.model` other than `langsplat`): the shared
//! pipeline plus the model's systems, a metrics file, the model's outputs and a
//! summary.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use lsplat_core::Config;
use lsplat_data::SceneData;
use lsplat_data::run::{self, MetricsLog, RunDir};
use lsplat_device::Backend;
use lsplat_engine::resources::Collective;
use lsplat_engine::systems::checkpoint::resident_bytes;
use lsplat_engine::{MetricsFilePlugin, Model, Session};
use tracing::info;

use crate::progress;

/// Trains `model` on `data` and writes its outputs into `run` (rank 0's run directory).
pub fn train<B: Backend>(
    dev: B,
    cfg: &Config,
    data: SceneData,
    run: &RunDir,
    backend: &str,
    collective: Collective,
    model: Arc<dyn Model<B>>,
) -> Result<()> {
    let name = model.name();
    let gaussians = data.gaussians.len();
    let t_setup = Instant::now();
    let mut session = Session::with_model(dev, cfg, data, collective, model)?;
    let setup_seconds = t_setup.elapsed().as_secs_f64();
    let log = MetricsLog::create(&run.join(run::METRICS_FILE))?;
    session.engine.add_plugin(MetricsFilePlugin::<B>::new(log));
    session.engine.initialize()?;
    info!(
        backend = %backend,
        model = name,
        out = %run.path().display(),
        setup_s = format!("{setup_seconds:.2}"),
        rss_mb = resident_bytes().map_or(0, |b| b >> 20),
        "training"
    );
    let iters = cfg.train.iterations as u64;
    let bar = progress::bar(iters, "steps");
    if !cfg.log.progress {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut losses: Vec<(u64, f32)> = Vec::new();
    let t0 = Instant::now();
    for _ in 0..iters {
        if let Err(e) = session.step() {
            bar.abandon();
            return Err(anyhow::Error::from(e)
                .context(format!("training {name} in {}", run.path().display())));
        }
        bar.inc(1);
        let fresh = session.drain_records();
        if let (Some(a), Some(b)) = (fresh.first(), fresh.last()) {
            let mean = fresh.iter().map(|r| r.loss as f64).sum::<f64>() / fresh.len() as f64;
            bar.set_message(format!(
                "loss {mean:.6} (mean of steps {}–{})",
                a.step, b.step
            ));
        }
        losses.extend(fresh.iter().map(|r| (r.step, r.loss)));
        session.drain_cache_reports();
    }
    let seconds = t0.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let report = session.model_report()?;
    let files = session
        .write_model_outputs(run.path())
        .with_context(|| format!("writing the {name} outputs"))?;
    let window = losses.len().clamp(1, 100).min(losses.len().max(1));
    let mean = |s: &[(u64, f32)]| {
        if s.is_empty() {
            f64::NAN
        } else {
            s.iter().map(|(_, l)| *l as f64).sum::<f64>() / s.len() as f64
        }
    };
    let first = mean(&losses[..window.min(losses.len())]);
    let last = mean(&losses[losses.len().saturating_sub(window)..]);
    let stats = session.cache_stats();
    let summary = serde_json::json!({
        "model": name,
        "backend": backend,
        "gaussians": gaussians,
        "steps": iters,
        "seconds": seconds,
        "ms_per_step": if iters > 0 { 1e3 * seconds / iters as f64 } else { 0.0 },
        "setup_seconds": setup_seconds,
        "loss_first_window": first,
        "loss_last_window": last,
        "loss_window_steps": window,
        "outputs": files,
        "report": report,
        "cache": { "hits": stats.hits, "misses": stats.misses, "evictions": stats.evictions, "bytes": stats.bytes },
    });
    run.finish(serde_json::to_string_pretty(&summary)?.as_bytes())?;
    println!(
        "{name}: {iters} steps in {seconds:.1} s ({:.2} ms/step) on {backend}",
        if iters > 0 {
            1e3 * seconds / iters as f64
        } else {
            0.0
        }
    );
    println!(
        "loss: mean of the first {window} steps {first:.6}, of the last {window} {last:.6} ({:.2}× lower)",
        first / last
    );
    if !report.is_null() {
        println!("quality: {report}");
    }
    println!("outputs: {}", files.join(", "));
    println!("run directory: {}", run.path().display());
    Ok(())
}
