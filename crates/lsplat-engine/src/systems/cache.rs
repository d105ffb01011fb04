//! Cache bookkeeping: hit/miss counting, building caches for cold cameras under the
//! byte budget, least-recently-used eviction.

use bevy_ecs::prelude::*;
use lsplat_device::Backend;
use lsplat_render::placement::{Placer, recompute_hint};
use lsplat_render::{CacheLevel, RasterCache, cache};

use crate::components::{Cache, Geometry, GroundTruth, HeldOut, InBatch};
use crate::resources::{
    CacheBudget, CacheSpill, CacheStats, Dev, Fault, Frames, RenderSettings, Step,
};

/// Counts hits and misses and stamps the batch cameras as used now.
pub fn touch_caches<B: Backend>(
    step: Res<Step>,
    mut stats: ResMut<CacheStats>,
    mut batch: Query<&mut Cache<B>, With<InBatch>>,
) {
    for mut c in &mut batch {
        if c.cache.level() == CacheLevel::None {
            stats.misses += 1;
        } else {
            stats.hits += 1;
        }
        c.last_used = step.0;
    }
}

/// Run condition: some batch camera is cold but may hold a cache.
pub fn any_promotable<B: Backend>(q: Query<&Cache<B>, With<InBatch>>) -> bool {
    q.iter()
        .any(|c| c.cache.level() == CacheLevel::None && c.allowed > CacheLevel::None)
}

/// Builds the cache of each cold batch camera from its frame's projection and bins, at
/// the best level that fits the budget after evicting least-recently-used cameras
/// outside the batch. An evicted camera falls back to the next lower level.
///
/// With a spill target ([`CacheSpill`]), the first operator built plans where the
/// cameras' operators go (announced once: in memory, on disk, rebuilt), and an
/// operator that finds the budget full is spilled to disk while the plan's disk share
/// lasts (its file mapped into memory: the same bits, almost no memory) instead of
/// evicting another camera's. When only this batch's cameras are left in memory,
/// their operators move to disk too, so a cold camera is not left to the rasterizer
/// (whose sums are ordered differently) for lack of room.
#[allow(clippy::too_many_arguments)]
pub fn admit_caches<B: Backend>(
    dev: Res<Dev<B>>,
    render: Res<RenderSettings>,
    budget: Res<CacheBudget>,
    geometry: Single<&Geometry<B>>,
    mut stats: ResMut<CacheStats>,
    mut frames: ResMut<Frames<B>>,
    mut cams: Query<(Entity, &mut Cache<B>, Option<&InBatch>)>,
    gts: Query<&GroundTruth<B>>,
    held_out: Query<(), With<HeldOut>>,
    mut spill: ResMut<CacheSpill>,
    mut fault: ResMut<Fault>,
) {
    let batch: Vec<(Entity, usize)> = cams
        .iter()
        .filter_map(|(e, c, b)| {
            let b = b?;
            (c.cache.level() == CacheLevel::None && c.allowed > CacheLevel::None)
                .then_some((e, b.slot))
        })
        .collect();
    for (entity, slot) in batch {
        let scratch = &mut frames.0[slot].scratch;
        let Ok((_, c, _)) = cams.get(entity) else {
            continue;
        };
        let Ok(gt) = gts.get(entity) else { continue };
        let mut level = c.allowed;
        let mut build_time = std::time::Duration::ZERO;
        let built = loop {
            if level == CacheLevel::None {
                break None;
            }
            // Size first: a geometry cache takes the scratch buffers, which this
            // step still needs if it is then rejected.
            let (bytes, candidate) = match level {
                CacheLevel::Geometry => (
                    dev.0
                        .geometry_cache_bytes(&scratch.projection, &scratch.bins),
                    None,
                ),
                _ => {
                    let t0 = std::time::Instant::now();
                    let Some(cand) = fault.check(cache::promote(
                        &dev.0,
                        scratch,
                        &gt.0.pixels,
                        geometry.count,
                        level,
                        render.0.operator_precision,
                    )) else {
                        return;
                    };
                    build_time = t0.elapsed();
                    (cand.bytes(&dev.0), Some(cand))
                }
            };
            if bytes as u64 <= budget.limit {
                break Some((level, bytes, candidate));
            }
            level = level.lower();
        };
        let Some((level, mut bytes, mut candidate)) = built else {
            if let Ok((_, mut c, _)) = cams.get_mut(entity) {
                c.allowed = CacheLevel::None;
            }
            continue;
        };
        // A spilled operator: its copy mapped from disk, and its bytes there.
        let mut spilled_op = None;
        if let Some(RasterCache::Operator { op }) = &candidate {
            if spill.placer.is_none() {
                let cameras = cams.iter().len().saturating_sub(held_out.iter().len());
                let target = spill.target.clone();
                let Some(placer) = fault.check(Placer::new(
                    &dev.0,
                    target,
                    cameras,
                    budget.limit,
                    op,
                    build_time,
                )) else {
                    return;
                };
                tracing::info!(
                    "{} (memory budget {:.2} GB)",
                    placer.plan(),
                    budget.limit as f64 / 1e9
                );
                if let Some(hint) = recompute_hint(placer.plan(), render.0.operator_precision) {
                    tracing::info!("{hint}");
                }
                spill.placer = Some(placer);
            }
            if stats.bytes + bytes as u64 > budget.limit
                && let Some(placer) = spill.placer.as_mut()
            {
                let stem = format!("train-camera-{}", entity.index());
                let Some(spilled) = fault.check(placer.try_spill(&dev.0, op, &stem)) else {
                    return;
                };
                spilled_op = spilled;
            }
        }
        // The spilled copy replaces the candidate and needs only its resident bytes
        // (which may still have to evict a camera held in memory).
        let mut disk_bytes = None;
        if let Some(op) = spilled_op {
            let s = dev.0.operator_stats(&op);
            bytes = s.resident_bytes;
            disk_bytes = Some(s.bytes as u64);
            candidate = Some(RasterCache::Operator { op });
        }
        // Make room: least-recently-used caches in memory outside the batch move to
        // disk (an operator, when spilling is on and the disk has room: the same
        // bits, so the run does not change) or are evicted, until it fits.
        while stats.bytes + bytes as u64 > budget.limit {
            let victim = least_recent(&cams, entity, false, |c| {
                c.cache.level() > CacheLevel::None && !c.cache.on_disk(&dev.0)
            });
            let Some(victim) = victim else { break };
            let Ok((_, mut vc, _)) = cams.get_mut(victim) else {
                break;
            };
            let freed = vc.cache.bytes(&dev.0) as u64;
            if let Some(placer) = spill.placer.as_mut() {
                let stem = format!("train-camera-{}", victim.index());
                let Some(moved) = demote(&dev.0, placer, &mut vc, &stem, &mut stats, &mut fault)
                else {
                    return;
                };
                if moved {
                    continue;
                }
            }
            if let Some(s) = vc.cache.operator_stats(&dev.0) {
                stats.nnz -= s.nnz as u64;
                stats.operators -= 1;
            }
            vc.allowed = vc.cache.level().lower();
            vc.cache = RasterCache::Cold;
            stats.bytes -= freed;
            stats.evictions += 1;
        }
        // Still full, with only this batch's cameras in memory: their operators move to
        // disk too (the same bits, so this step's products do not change). A batch
        // camera is never evicted.
        while stats.bytes + bytes as u64 > budget.limit {
            let Some(placer) = spill.placer.as_mut() else {
                break;
            };
            let victim = least_recent(&cams, entity, true, |c| {
                matches!(c.cache, RasterCache::Operator { .. }) && !c.cache.on_disk(&dev.0)
            });
            let Some(victim) = victim else { break };
            let Ok((_, mut vc, _)) = cams.get_mut(victim) else {
                break;
            };
            let stem = format!("train-camera-{}", victim.index());
            let Some(moved) = demote(&dev.0, placer, &mut vc, &stem, &mut stats, &mut fault) else {
                return;
            };
            if !moved {
                break;
            }
        }
        if stats.bytes + bytes as u64 > budget.limit {
            continue; // Everything else is in the batch: stay cold this visit.
        }
        let new_cache = match candidate {
            Some(c) => c,
            None => {
                let Some(c) = fault.check(cache::promote(
                    &dev.0,
                    scratch,
                    &gt.0.pixels,
                    geometry.count,
                    level,
                    render.0.operator_precision,
                )) else {
                    return;
                };
                c
            }
        };
        if let Some(s) = new_cache.operator_stats(&dev.0) {
            stats.nnz += s.nnz as u64;
            stats.operators += 1;
        }
        stats.bytes += bytes as u64;
        if let Some(d) = disk_bytes {
            stats.spilled += 1;
            stats.disk_bytes += d;
        }
        if let Ok((_, mut c, _)) = cams.get_mut(entity) {
            c.cache = new_cache;
        }
    }
}

/// The least recently used camera other than `entity`, in this batch or outside it
/// (`in_batch`), whose cache passes `keep` (ties go to the lower entity).
fn least_recent<B: Backend>(
    cams: &Query<(Entity, &mut Cache<B>, Option<&InBatch>)>,
    entity: Entity,
    in_batch: bool,
    keep: impl Fn(&Cache<B>) -> bool,
) -> Option<Entity> {
    cams.iter()
        .filter(|(e, c, b)| b.is_some() == in_batch && *e != entity && keep(c))
        .min_by_key(|(e, c, _)| (c.last_used, *e))
        .map(|(e, ..)| e)
}

/// Moves `vc`'s operator held in memory to disk (the same bits) and counts it: true
/// when it moved, false when `vc` holds no operator or the disk has no room for it,
/// `None` on a fault (recorded in `fault`).
fn demote<B: Backend>(
    dev: &B,
    placer: &mut Placer,
    vc: &mut Cache<B>,
    stem: &str,
    stats: &mut CacheStats,
    fault: &mut Fault,
) -> Option<bool> {
    let RasterCache::Operator { op } = &vc.cache else {
        return Some(false);
    };
    let freed = vc.cache.bytes(dev) as u64;
    let Some(moved) = fault.check(placer.demote(dev, op, stem))? else {
        return Some(false);
    };
    let s = dev.operator_stats(&moved);
    stats.bytes -= freed.saturating_sub(s.resident_bytes as u64);
    stats.spilled += 1;
    stats.disk_bytes += s.bytes as u64;
    stats.demoted += 1;
    vc.cache = RasterCache::Operator { op: moved };
    Some(true)
}
