//! Per-phase wall time, for benchmarks only: a marker system between consecutive
//! phases waits for the device and stamps the time. Training never installs it
//! (the waits would be host syncs inside the step).

use std::marker::PhantomData;
use std::time::Instant;

use bevy_ecs::prelude::*;
use lsplat_device::Backend;

use crate::resources::Dev;
use crate::{Engine, Plugin, TrainSystems};

/// Accumulated seconds per phase and the number of steps timed.
#[derive(Resource, Default, Clone, Debug)]
pub struct PhaseTimes {
    /// Seconds spent in each phase, in [`TrainSystems::ALL`] order.
    pub seconds: [f64; 9],
    /// Steps measured.
    pub steps: u64,
    stamp: Option<Instant>,
}

impl PhaseTimes {
    /// Clears the totals.
    pub fn reset(&mut self) {
        self.seconds = [0.0; 9];
        self.steps = 0;
        self.stamp = None;
    }

    /// Milliseconds per step for each phase.
    pub fn ms_per_step(&self) -> Vec<(TrainSystems, f64)> {
        let n = self.steps.max(1) as f64;
        TrainSystems::ALL
            .iter()
            .zip(self.seconds)
            .map(|(p, s)| (*p, 1e3 * s / n))
            .collect()
    }
}

fn mark<B: Backend, const K: usize>(dev: Res<Dev<B>>, mut t: ResMut<PhaseTimes>) {
    let _ = dev.0.synchronize();
    let now = Instant::now();
    if K > 0
        && let Some(prev) = t.stamp
    {
        t.seconds[K - 1] += (now - prev).as_secs_f64();
    }
    if K == 9 {
        t.steps += 1;
    }
    t.stamp = Some(now);
}

/// Installs the phase markers.
pub struct PhaseTimingPlugin<B: Backend>(pub PhantomData<B>);

impl<B: Backend> Plugin for PhaseTimingPlugin<B> {
    fn build(self, engine: &mut Engine) {
        use TrainSystems::*;
        engine.world.init_resource::<PhaseTimes>();
        engine.add_systems_unphased((
            mark::<B, 0>.before(Load),
            mark::<B, 1>.after(Load).before(Cache),
            mark::<B, 2>.after(Cache).before(Project),
            mark::<B, 3>.after(Project).before(Rasterize),
            mark::<B, 4>.after(Rasterize).before(Loss),
            mark::<B, 5>.after(Loss).before(Backward),
            mark::<B, 6>.after(Backward).before(AllReduce),
            mark::<B, 7>.after(AllReduce).before(Step),
            mark::<B, 8>.after(Step).before(Log),
            mark::<B, 9>.after(Log),
        ));
    }
}
