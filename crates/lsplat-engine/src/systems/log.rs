//! Log: read the device metrics back every N steps; advance the step counter.

use bevy_ecs::prelude::*;
use lsplat_device::Backend;

use crate::StepRecord;
use crate::resources::{CacheStats, Dev, Fault, LogSink, Metrics, Step, TrainSettings};

/// Run condition: this step closes a logging window (or is the last step).
pub fn log_due<B: Backend>(
    step: Res<Step>,
    metrics: Res<Metrics<B>>,
    settings: Res<TrainSettings>,
) -> bool {
    let s = step.0 + 1;
    s.is_multiple_of(metrics.every) || s == settings.0.iterations as u64
}

/// Reads the window's losses back (the only device→host copy of the loop).
pub fn read_metrics<B: Backend>(
    dev: Res<Dev<B>>,
    step: Res<Step>,
    metrics: Res<Metrics<B>>,
    mut sink: ResMut<LogSink>,
    mut fault: ResMut<Fault>,
) {
    let Some(losses) = fault.check(dev.0.download(&metrics.loss)) else {
        return;
    };
    let last = step.0;
    let first = last - last % metrics.every;
    for s in first..=last {
        sink.records.push(StepRecord {
            step: s,
            loss: losses[(s - first) as usize],
        });
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
