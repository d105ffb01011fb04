//! `lsplat-engine train`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lsplat_core::Config;
use lsplat_data::SceneData;
use lsplat_data::ply::SplatPly;
use lsplat_device::Backend;
use lsplat_engine::Session;
use lsplat_render::{BackendVisitor, Device};
use tracing::info;

use crate::{TrainArgs, run, scene};

/// Runs `train`.
pub fn run(args: TrainArgs) -> Result<()> {
    let cfg = scene::config(&args.scene)?;
    let out = args.out.unwrap_or_else(run::default_dir);
    let (data, ply) = scene::load(&cfg)?;
    info!(
        gaussians = data.gaussians.len(),
        cameras = data.cameras.len(),
        channels = data.dim(),
        rss_mb = run::resident_bytes().map_or(0, |b| b >> 20),
        "scene loaded{}",
        if cfg.scene.is_demo() {
            " (embedded demo)"
        } else {
            ""
        }
    );
    let dev = Device::open(&cfg.device, &cfg.simt)?;
    dev.visit(TrainJob {
        cfg,
        data,
        ply,
        out,
    })
}

struct TrainJob {
    cfg: Config,
    data: SceneData,
    ply: Option<SplatPly>,
    out: PathBuf,
}

impl BackendVisitor for TrainJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let TrainJob {
            cfg,
            data,
            ply,
            out,
        } = self;
        let backend = dev.describe();
        run::create(&out)?;
        run::write_config(&out, &cfg.to_toml())?;
        let mut session = Session::new(dev, &cfg, data)?;
        info!(
            backend = %backend,
            out = %out.display(),
            cache = ?cfg.render.cache,
            rss_mb = run::resident_bytes().map_or(0, |b| b >> 20),
            "training"
        );
        let iters = cfg.train.iterations as u64;
        let bar = ProgressBar::with_draw_target(Some(iters), ProgressDrawTarget::stderr());
        if !cfg.log.progress {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} steps  {per_sec}  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let mut records = Vec::new();
        let mut cache_reports = Vec::new();
        let mut rss = Vec::new();
        let t0 = Instant::now();
        for _ in 0..iters {
            session.step()?;
            bar.inc(1);
            let fresh = session.drain_records();
            if let Some(last) = fresh.last() {
                bar.set_message(format!("loss {:.6}", last.loss));
                tracing::debug!(step = last.step, loss = last.loss, "metrics");
            }
            if let Some(last) = fresh.last() {
                rss.push((last.step, run::resident_bytes()));
            }
            records.extend(fresh);
            cache_reports.extend(session.drain_cache_reports());
        }
        let seconds = t0.elapsed().as_secs_f64();
        bar.finish_and_clear();
        let eval = if cfg.log.eval {
            Some(session.evaluate()?)
        } else {
            None
        };
        let features = session.features()?;
        let stats = session.cache_stats();
        run::write_outputs(
            &out,
            &run::Outputs {
                features: &features,
                channels: session.channels(),
                records: &records,
                eval,
                seconds,
                steps: iters,
                backend: backend.clone(),
                ply: ply.as_ref(),
                cache_reports: &cache_reports,
                rss: &rss,
            },
        )?;
        // Step losses are single batches: report window means.
        let window = records.len().clamp(1, 100);
        let mean = |r: &[lsplat_engine::StepRecord]| {
            r.iter().map(|x| x.loss as f64).sum::<f64>() / r.len().max(1) as f64
        };
        let first = mean(&records[..window.min(records.len())]);
        let last = mean(&records[records.len().saturating_sub(window)..]);
        println!(
            "trained {iters} steps in {seconds:.2} s ({:.0} it/s) on {backend}",
            iters as f64 / seconds.max(1e-9)
        );
        println!(
            "loss (mean of the first / last {window} steps): {first:.6} -> {last:.6} ({:.1}x lower)",
            first / last
        );
        if let Some(eval) = eval {
            println!(
                "recovered-feature similarity: mean cosine {:.4} over {} valid pixels (all cameras; masked L1 {:.6})",
                eval.mean_cosine, eval.pixels, eval.mean_l1
            );
        }
        println!(
            "cache: {} hits, {} misses, {} evictions, {:.1} MB held",
            stats.hits,
            stats.misses,
            stats.evictions,
            stats.bytes as f64 / 1e6
        );
        println!("run directory: {}", out.display());
        Ok(())
    }
}
