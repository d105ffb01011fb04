//! Log: read the device metrics back every N steps (and before a checkpoint); append
//! them to the run's metrics file; write checkpoints; advance the step counter.

use bevy_ecs::prelude::*;
use lsplat_device::Backend;

use crate::resources::{
    CacheStats, CheckpointSchedule, Collective, Dev, Fault, LogSink, Metrics, Step, StopRequest,
    TrainSettings,
};
use crate::{EngineError, StepRecord};

/// Run condition: this step closes a logging window, is the last step, or is followed
/// by a checkpoint (which must not lose the window's losses).
pub fn log_due<B: Backend>(
    step: Res<Step>,
    metrics: Res<Metrics<B>>,
    settings: Res<TrainSettings>,
    checkpoints: Option<Res<CheckpointSchedule>>,
    stop: Option<Res<StopRequest>>,
) -> bool {
    stop.is_some_and(|s| s.latched)
        || window_due(step.0, metrics.every, &settings, checkpoints.as_deref())
}

/// Whether step `step` closes a logging window, is the last or precedes a checkpoint.
fn window_due(
    step: u64,
    every: u64,
    settings: &TrainSettings,
    checkpoints: Option<&CheckpointSchedule>,
) -> bool {
    let s = step + 1;
    let iterations = settings.0.iterations() as u64;
    s.is_multiple_of(every)
        || s == iterations
        || checkpoints.is_some_and(|c| c.due(step, iterations))
}

/// Latches a stop request at the start of the Log phase: one atomic load per step,
/// no system call. With several ranks the flag is agreed (an `or` over the ranks)
/// only at the steps that read metrics back anyway, so every rank stops after the
/// same step and the collectives stay in line.
pub fn latch_stop<B: Backend>(
    step: Res<Step>,
    metrics: Option<Res<Metrics<B>>>,
    settings: Res<TrainSettings>,
    checkpoints: Option<Res<CheckpointSchedule>>,
    collective: Res<Collective>,
    mut stop: ResMut<StopRequest>,
    mut fault: ResMut<Fault>,
) {
    let raised = stop.flag.load(std::sync::atomic::Ordering::Relaxed);
    if collective.world_size <= 1 {
        stop.latched = raised;
        return;
    }
    let every = metrics.map_or(1, |m| m.every);
    if !window_due(step.0, every, &settings, checkpoints.as_deref()) {
        return;
    }
    let mut any = [raised as u64];
    if fault
        .check(collective.comm.or_u64("stop request", &mut any))
        .is_some()
    {
        stop.latched = any[0] != 0;
    }
}

/// Run condition: this process is rank 0 (the one that writes files).
pub fn is_rank0(collective: Res<Collective>) -> bool {
    collective.rank == 0
}

/// The step of the first non-finite loss, if any.
pub fn first_non_finite(records: &[StepRecord]) -> Option<u64> {
    records.iter().find(|r| !r.loss.is_finite()).map(|r| r.step)
}

/// Reads the losses not read back yet (the only device→host copy of the loop); a
/// non-finite loss stops the run with an error naming its step.
///
/// With several ranks each slot holds the rank's batch mean; the read-back averages
/// them over the ranks (every rank runs it at the same steps), so every rank sees the
/// loss of the global batch.
pub fn read_metrics<B: Backend>(
    dev: Res<Dev<B>>,
    step: Res<Step>,
    collective: Res<Collective>,
    mut metrics: ResMut<Metrics<B>>,
    mut sink: ResMut<LogSink>,
    mut fault: ResMut<Fault>,
) {
    let Some(mut losses) = fault.check(dev.0.download(&metrics.loss)) else {
        return;
    };
    if collective.world_size > 1 {
        if fault
            .check(collective.comm.sum_f32("loss read-back", &mut losses))
            .is_none()
        {
            return;
        }
        let scale = 1.0 / collective.world_size as f32;
        losses.iter_mut().for_each(|l| *l *= scale);
    }
    let last = step.0;
    let window_start = last - last % metrics.every;
    sink.window.clear();
    for s in window_start.max(metrics.unread_from)..=last {
        let record = StepRecord {
            step: s,
            loss: losses[(s - window_start) as usize],
        };
        sink.window.push(record);
        sink.records.push(record);
    }
    metrics.unread_from = last + 1;
    if let Some(bad) = first_non_finite(&sink.window) {
        fault.check::<(), _>(Err(EngineError::NonFinite {
            what: "the loss".into(),
            step: bad,
        }));
    }
}

/// Reports the cache counters (hits, misses, evictions, bytes) of the window.
pub fn report_cache_stats(step: Res<Step>, stats: Res<CacheStats>, mut sink: ResMut<LogSink>) {
    tracing::debug!(
        step = step.0,
        hits = stats.hits,
        misses = stats.misses,
        evictions = stats.evictions,
        bytes = stats.bytes,
        "raster caches"
    );
    sink.cache.push((step.0, *stats));
}

/// Advances the step counter (last system of the step).
pub fn advance_step(mut step: ResMut<Step>) {
    step.0 += 1;
}
