//! Log, on rank 0: the metrics file and checkpoints of the run directory.
//!
//! Both write only in the Log phase of the steps that close a logging window or are
//! followed by a checkpoint; the metrics of a window reach the file before the
//! checkpoint of the same step, so a resumed run never misses a logged step.

use std::path::PathBuf;

use bevy_ecs::prelude::*;
use lsplat_data::run::{Checkpoint, MetricsLog, save_checkpoint};
use lsplat_device::Backend;

use crate::components::{AdamState, FeatureParams, Geometry};
use crate::model::ActiveModel;
use crate::resources::{
    CacheStats, CheckpointSchedule, Dev, Fault, LogSink, Sampler, Step, TrainSettings,
};
use crate::{EngineError, StepRecord};

/// The run's metrics file (`metrics.jsonl`), appended every logging window.
#[derive(Resource)]
pub struct MetricsFile(pub MetricsLog);

/// Where checkpoints go and what they record besides the tensors.
#[derive(Resource, Clone, Debug)]
pub struct CheckpointTarget {
    /// The run directory (checkpoints go to its `checkpoints/`).
    pub run_dir: PathBuf,
    /// Newest checkpoints kept.
    pub keep: usize,
    /// The resolved configuration (TOML), stored in every checkpoint.
    pub config: String,
    /// Backend description, stored for information.
    pub backend: String,
    /// The run's identity (`lsplat_data::run::identity`, JSON), stored so a resumed
    /// run can tell its own checkpoints from others'.
    pub identity: Option<String>,
}

/// Resident set size of this process (Linux), from `/proc/self/status`.
pub fn resident_bytes() -> Option<u64> {
    proc_status_bytes("VmRSS:")
}

/// Peak resident set size of this process (Linux).
pub fn peak_resident_bytes() -> Option<u64> {
    proc_status_bytes("VmHWM:")
}

fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib = line.split_whitespace().nth(1)?.parse::<u64>().ok()?;
    Some(kib * 1024)
}

/// The metrics lines of one read-back window: `{"step", "loss"}` per step (a
/// non-finite loss is `null`), the window's last line also carrying the cache
/// counters and the resident memory.
pub fn window_lines(window: &[StepRecord], cache: Option<&CacheStats>, rss: Option<u64>) -> String {
    let mut out = String::new();
    for (i, r) in window.iter().enumerate() {
        let mut line = serde_json::json!({"step": r.step, "loss": r.loss});
        if i + 1 == window.len() {
            if let Some(c) = cache {
                line["cache_hits"] = c.hits.into();
                line["cache_misses"] = c.misses.into();
                line["cache_evictions"] = c.evictions.into();
                line["cache_bytes"] = c.bytes.into();
            }
            if let Some(b) = rss {
                line["rss_bytes"] = b.into();
            }
        }
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

/// Appends the window just read back to the metrics file (flushed).
pub fn append_metrics(
    sink: Res<LogSink>,
    stats: Option<Res<CacheStats>>,
    mut file: ResMut<MetricsFile>,
    mut fault: ResMut<Fault>,
) {
    let lines = window_lines(&sink.window, stats.as_deref(), resident_bytes());
    fault.check(file.0.append(&lines));
}

/// Run condition: a checkpoint follows this step.
pub fn checkpoint_due(
    step: Res<Step>,
    settings: Res<TrainSettings>,
    schedule: Res<CheckpointSchedule>,
    stop: Option<Res<crate::resources::StopRequest>>,
) -> bool {
    stop.is_some_and(|s| s.latched) || schedule.due(step.0, settings.0.iterations() as u64)
}

/// Run condition: no system failed this step (a failed step is never checkpointed).
pub fn no_fault(fault: Res<Fault>) -> bool {
    !fault.failed()
}

/// The training state after `step` completed steps, downloaded from the device.
pub fn snapshot<B: Backend>(
    dev: &B,
    params: &FeatureParams<B>,
    adam: &AdamState<B>,
    gaussians: usize,
    step: u64,
    sampler_position: u64,
    target: &CheckpointTarget,
) -> Result<Checkpoint, EngineError> {
    Ok(Checkpoint {
        step,
        sampler_position,
        gaussians,
        channels: params.channels,
        backend: target.backend.clone(),
        config: target.config.clone(),
        params: dev.download(&params.x)?,
        adam_m: dev.download(&adam.m)?,
        adam_v: dev.download(&adam.v)?,
        model: None,
        extra: Vec::new(),
        identity: target.identity.clone(),
        checksummed: true,
    })
}

/// Writes a checkpoint of the state after this step (atomically; then prunes old
/// ones). A state holding a NaN or infinity is never written: the run stops with an
/// error and the last good checkpoint stays the newest.
pub fn write_checkpoint<B: Backend>(
    dev: Res<Dev<B>>,
    step: Res<Step>,
    sampler: Res<Sampler>,
    target: Res<CheckpointTarget>,
    state: Single<(&FeatureParams<B>, &AdamState<B>, &Geometry<B>)>,
    mut fault: ResMut<Fault>,
) {
    let (params, adam, geometry) = *state;
    let ckpt = snapshot(
        &dev.0,
        params,
        adam,
        geometry.count,
        step.0 + 1,
        sampler.0.position(),
        &target,
    );
    let Some(ckpt) = fault.check(ckpt) else {
        return;
    };
    fault.check(save_checked(&target, &ckpt, step.0));
}

/// Saves `ckpt` unless it holds a NaN or infinity (then the error names the tensor and
/// the step).
fn save_checked(
    target: &CheckpointTarget,
    ckpt: &Checkpoint,
    step: u64,
) -> Result<(), EngineError> {
    if let Some((what, _)) = ckpt.first_non_finite() {
        return Err(EngineError::NonFinite {
            what: format!("tensor `{what}`"),
            step,
        });
    }
    save_checkpoint(&target.run_dir, ckpt, target.keep)?;
    Ok(())
}

/// [`write_checkpoint`] for a plugin model: its [`crate::Model::snapshot`], with the
/// model's name in the checkpoint.
pub fn write_model_checkpoint<B: Backend>(world: &mut World) {
    let model = world.resource::<ActiveModel<B>>().0.clone();
    let r = model.snapshot(world).and_then(|state| {
        let step = world.resource::<Step>().0;
        let target = world.resource::<CheckpointTarget>();
        let ckpt = Checkpoint {
            step: step + 1,
            sampler_position: world.resource::<Sampler>().0.position(),
            gaussians: state.gaussians,
            channels: state.channels,
            backend: target.backend.clone(),
            config: target.config.clone(),
            params: state.params,
            adam_m: state.adam_m,
            adam_v: state.adam_v,
            model: Some(model.name().to_string()),
            extra: state.extra,
            identity: target.identity.clone(),
            checksummed: true,
        };
        save_checked(target, &ckpt, step)
    });
    world.resource_mut::<Fault>().check(r);
}
