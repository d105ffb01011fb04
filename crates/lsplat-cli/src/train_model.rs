//! `train` of a plugin's model (`train.model` other than `langsplat`): the shared
//! pipeline plus the model's systems, a metrics file, the model's outputs and a
//! summary.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use lsplat_core::Config;
use lsplat_data::SceneData;
use lsplat_data::run::{Checkpoint, RunDir};
use lsplat_device::Backend;
use lsplat_engine::resources::Collective;
use lsplat_engine::systems::checkpoint::resident_bytes;
use lsplat_engine::{MetricsFilePlugin, Model, Session};
use tracing::{info, warn};

use crate::progress;

/// What a plugin model's run is given besides its data and model.
pub struct Job<'a> {
    /// The resolved configuration.
    pub cfg: &'a Config,
    /// Rank 0's run directory.
    pub run: &'a RunDir,
    /// The checkpoint a resumed run continues from.
    pub ckpt: Option<&'a Checkpoint>,
    /// The backend, in words.
    pub backend: &'a str,
    /// The run's identity (JSON), recorded in its checkpoints.
    pub identity: Option<String>,
    /// Raised by a first Ctrl-C / SIGTERM: the loop stops after a checkpointed step.
    pub signals: &'a crate::signals::Signals,
}

/// Trains `model` on `data` and writes its outputs into the job's run directory,
/// writing checkpoints on the way when the model can (else saying so at start).
pub fn train<B: Backend>(
    dev: B,
    job: Job<'_>,
    data: SceneData,
    collective: Collective,
    model: Arc<dyn Model<B>>,
) -> Result<()> {
    let Job {
        cfg,
        run,
        ckpt,
        backend,
        identity,
        signals,
    } = job;
    let name = model.name();
    if !model.checkpoints() {
        if ckpt.is_some() {
            bail!("train.model = {name} writes no checkpoints: its runs cannot be resumed");
        }
        if cfg.log.checkpoint_every > 0 {
            warn!(
                "train.model = {name} runs write no checkpoints: log.checkpoint_every = {} is ignored (the outputs are written at the end)",
                cfg.log.checkpoint_every
            );
        }
    }
    let gaussians = data.gaussians.len();
    let t_setup = Instant::now();
    let checkpoints = model.checkpoints();
    let channels = model.render_channels();
    let mut session = Session::with_model(dev, cfg, data, collective, model)?;
    let setup_seconds = t_setup.elapsed().as_secs_f64();
    let (log, mut losses) = crate::train::metrics_log(run, ckpt)?;
    session.engine.add_plugin(MetricsFilePlugin::<B>::new(log));
    if checkpoints {
        session.engine.add_plugin(crate::train::checkpoints::<B>(
            cfg,
            Some(run.path()),
            backend,
            identity,
        ));
    }
    session.engine.initialize()?;
    session.set_stop_flag(signals.flag.clone());
    if let Some(c) = ckpt {
        session.restore(c)?;
        run.unfinish()?;
    }
    let start = session.steps_done();
    info!(
        backend = %backend,
        model = name,
        out = %run.path().display(),
        from_step = start,
        setup_s = format!("{setup_seconds:.2}"),
        rss_mb = resident_bytes().map_or(0, |b| b >> 20),
        "training"
    );
    let iters = cfg.train.iterations() as u64;
    let cadence = progress::Cadence::of(&cfg.log);
    let mut bar = progress::Progress::new("train", iters, "steps", cfg.log.progress, cadence);
    bar.set_position(start);
    let t0 = Instant::now();
    for _ in start..iters {
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
        if session.stop_requested() {
            bar.abandon();
            let steps = session.steps_done();
            let kept = crate::train::write_interrupted(run, steps, signals)?;
            return Err(crate::train::interrupted(
                signals,
                Some(run),
                steps,
                kept.as_deref(),
            ));
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let ran = iters - start;
    bar.finish();
    // The same evaluation, summary fields and printout as the built-in model's runs.
    let t_eval = Instant::now();
    let quality = if cfg.log.eval {
        Some(session.quality()?)
    } else {
        None
    };
    let eval_seconds = t_eval.elapsed().as_secs_f64();
    let report = session.model_report()?;
    let files = session
        .write_model_outputs(run.path())
        .with_context(|| format!("writing the {name} outputs"))?;
    let stats = session.cache_stats();
    let fitted = crate::train::Fitted {
        losses,
        seconds,
        start,
        steps: iters,
        fit: None,
        stopped: false,
    };
    let o = crate::run::Outputs {
        features: &[],
        channels,
        losses: &fitted.losses,
        quality: quality.as_ref().and_then(|q| q.first().copied()),
        holdout: cfg.eval.holdout,
        solver: cfg.train.solver.name(),
        fit: None,
        seconds,
        session_steps: ran,
        steps: iters,
        backend: backend.to_string(),
        ply: None,
    };
    let note = format!("{name}: the model's own outputs ({})", files.join(", "));
    let mut summary = crate::run::summary(&o, gaussians, &note);
    summary["model"] = name.into();
    summary["outputs"] = files.clone().into();
    summary["ms_per_step"] = if ran > 0 {
        1e3 * seconds / ran as f64
    } else {
        0.0
    }
    .into();
    summary["setup_seconds"] = setup_seconds.into();
    summary["cache"] = serde_json::json!({
        "hits": stats.hits, "misses": stats.misses, "evictions": stats.evictions, "bytes": stats.bytes,
    });
    if !report.is_null() {
        summary["report"] = report;
    }
    run.finish(serde_json::to_string_pretty(&summary)?.as_bytes())?;
    println!("model {name}: outputs {}", files.join(", "));
    crate::train::print_summary(cfg, backend, &fitted, quality.as_deref(), eval_seconds);
    println!(
        "cache: {} hits, {} misses, {} evictions, {:.1} MB held",
        stats.hits,
        stats.misses,
        stats.evictions,
        stats.bytes as f64 / 1e6
    );
    println!("run directory: {}", run.path().display());
    Ok(())
}
