//! Load: pick the batch. Cache: make its ground truth resident.

use bevy_ecs::prelude::*;
use lsplat_device::Backend;

use crate::components::{GroundTruth, InBatch, Labels};
use crate::resources::{CameraIndex, Dev, Fault, Sampler, TileConfig, TrainSettings};

/// Moves the `InBatch` marker to the next cameras of the sampler.
pub fn sample_batch(
    mut commands: Commands,
    mut sampler: ResMut<Sampler>,
    settings: Res<TrainSettings>,
    index: Res<CameraIndex>,
    current: Query<Entity, With<InBatch>>,
) {
    for e in &current {
        commands.entity(e).remove::<InBatch>();
    }
    for slot in 0..settings.0.batch_size as usize {
        let cam = sampler.0.next_camera();
        commands.entity(index.0[cam]).insert(InBatch { slot });
    }
}

/// Uploads the ground truth of batch cameras seen for the first time. It stays
/// resident: later visits never reload it.
pub fn make_ground_truth_resident<B: Backend>(
    mut commands: Commands,
    dev: Res<Dev<B>>,
    tiles: Res<TileConfig>,
    cold: Query<(Entity, &Labels), (With<InBatch>, Without<GroundTruth<B>>)>,
    mut fault: ResMut<Fault>,
) {
    for (e, labels) in &cold {
        if let Some(gt) = fault.check(crate::gt::upload(&dev.0, &labels.0, tiles.tile_size)) {
            commands.entity(e).insert(GroundTruth(gt));
        }
    }
}
