use bevy_ecs::prelude::*;
use bevy_ecs::schedule::{ScheduleLabel, SingleThreadedExecutor};
use bevy_ecs::system::ScheduleSystem;

use crate::EngineError;
use crate::resources::Fault;

/// The phases of one training step, in order.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrainSystems {
    /// Pick the batch's cameras.
    Load,
    /// Make ground truth resident; note which caches are cold.
    Cache,
    /// Project the Gaussians for cold or uncached cameras.
    Project,
    /// Bin, build caches, prepare features, render the batch.
    Rasterize,
    /// Loss on the valid pixels and its gradient.
    Loss,
    /// Gradients of the features.
    Backward,
    /// Mean of gradients across ranks.
    AllReduce,
    /// Optimiser step.
    Step,
    /// Periodic read-back of the metrics.
    Log,
}

impl TrainSystems {
    /// Every phase in execution order.
    pub const ALL: [TrainSystems; 9] = [
        TrainSystems::Load,
        TrainSystems::Cache,
        TrainSystems::Project,
        TrainSystems::Rasterize,
        TrainSystems::Loss,
        TrainSystems::Backward,
        TrainSystems::AllReduce,
        TrainSystems::Step,
        TrainSystems::Log,
    ];
}

/// The schedule of one training step.
#[derive(ScheduleLabel, Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrainStep;

/// The one-shot schedule of a training-free fit (a solver plugin's systems).
#[derive(ScheduleLabel, Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fit;

/// Orders the phases: the one place where their order is declared.
pub fn configure_phases(schedule: &mut Schedule) {
    use TrainSystems::*;
    schedule.configure_sets(
        (
            Load, Cache, Project, Rasterize, Loss, Backward, AllReduce, Step, Log,
        )
            .chain(),
    );
}

/// Something that adds resources and systems to an [`Engine`]. A plain
/// `fn(&mut Engine)` (or closure) is a plugin too.
///
/// ```
/// use bevy_ecs::prelude::*;
/// use lsplat_engine::resources::Step;
/// use lsplat_engine::{Engine, Plugin, TrainSystems};
///
/// #[derive(Resource, Default)]
/// struct Seen(u64);
///
/// struct CountSteps;
///
/// impl Plugin for CountSteps {
///     fn build(self, engine: &mut Engine) {
///         engine.insert_resource(Seen::default());
///         engine.add_systems(TrainSystems::Log, |mut s: ResMut<Seen>| s.0 += 1);
///     }
/// }
///
/// let mut engine = Engine::new();
/// engine.add_plugin(CountSteps).insert_resource(Step(0));
/// engine.step().unwrap();
/// engine.step().unwrap();
/// assert_eq!(engine.world.resource::<Seen>().0, 2);
/// ```
pub trait Plugin: Sized {
    /// Adds the plugin's parts (consuming the plugin, which may own a device).
    fn build(self, engine: &mut Engine);
    /// A name for logs.
    fn name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }
}

impl<F: FnOnce(&mut Engine)> Plugin for F {
    fn build(self, engine: &mut Engine) {
        self(engine)
    }
}

/// The world, the step schedule and the fit schedule.
pub struct Engine {
    /// Entities, components and resources.
    pub world: World,
    schedule: Schedule,
    fit: Schedule,
    plugins: Vec<&'static str>,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new()
    }
}

impl Engine {
    /// An empty engine with the phases configured and a single-threaded executor.
    pub fn new() -> Self {
        let mut schedule = Schedule::new(TrainStep);
        schedule.set_executor(SingleThreadedExecutor::default());
        configure_phases(&mut schedule);
        let mut fit = Schedule::new(Fit);
        fit.set_executor(SingleThreadedExecutor::default());
        let mut world = World::new();
        world.init_resource::<Fault>();
        Engine {
            world,
            schedule,
            fit,
            plugins: Vec::new(),
        }
    }

    /// Adds a plugin.
    pub fn add_plugin(&mut self, plugin: impl Plugin) -> &mut Self {
        self.plugins.push(plugin.name());
        plugin.build(self);
        self
    }

    /// Names of the plugins added, in order.
    pub fn plugins(&self) -> &[&'static str] {
        &self.plugins
    }

    /// Adds systems to a phase.
    pub fn add_systems<M>(
        &mut self,
        phase: TrainSystems,
        systems: impl IntoScheduleConfigs<ScheduleSystem, M>,
    ) -> &mut Self {
        self.schedule.add_systems(systems.in_set(phase));
        self
    }

    /// Adds systems outside the phases (they must order themselves against them).
    pub fn add_systems_unphased<M>(
        &mut self,
        systems: impl IntoScheduleConfigs<ScheduleSystem, M>,
    ) -> &mut Self {
        self.schedule.add_systems(systems);
        self
    }

    /// Adds systems to the fit schedule (run once by [`Engine::fit`]).
    pub fn add_fit_systems<M>(
        &mut self,
        systems: impl IntoScheduleConfigs<ScheduleSystem, M>,
    ) -> &mut Self {
        self.fit.add_systems(systems);
        self
    }

    /// Runs the fit schedule once. A system that failed leaves its error in the
    /// [`Fault`] resource, which is returned here.
    pub fn fit(&mut self) -> Result<(), EngineError> {
        self.fit.run(&mut self.world);
        match self.world.resource_mut::<Fault>().0.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Inserts a resource.
    pub fn insert_resource<R: Resource>(&mut self, r: R) -> &mut Self {
        self.world.insert_resource(r);
        self
    }

    /// Runs one step. A system that failed leaves its error in the [`Fault`]
    /// resource, which is returned here.
    pub fn step(&mut self) -> Result<(), EngineError> {
        self.schedule.run(&mut self.world);
        match self.world.resource_mut::<Fault>().0.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Builds the schedule now (first-run cost out of timed loops).
    pub fn initialize(&mut self) -> Result<(), EngineError> {
        self.schedule
            .initialize(&mut self.world)
            .map(|_| ())
            .map_err(|e| EngineError::Schedule(format!("{e:?}")))
    }
}
