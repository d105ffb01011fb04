//! The ECS training engine.
//!
//! Splat clouds and cameras are entities; device buffers are owned by their
//! components; singletons are resources. One training step is one run of the
//! [`Engine`]'s schedule, whose phases are the [`TrainSystems`] sets, chained in
//! [`configure_phases`]. A training-free solver is a plugin whose system runs once in
//! the [`Fit`] schedule instead. Systems are thin adapters over plain functions of the
//! domain crates. Behaviour is added by [`Plugin`]s (bevy_app is not used: its
//! per-update overhead is measurable at thousands of steps per second).

pub mod components;
mod engine;
pub mod error;
pub mod gt;
pub mod loss;
pub mod model;
pub mod plugins;
pub mod resources;
pub mod sampler;
pub mod session;
pub mod systems;
pub mod timing;

pub use engine::{Engine, Fit, Plugin, TrainSystems, configure_phases};
pub use error::EngineError;
pub use loss::{ActiveLoss, PixelLoss};
pub use lsplat_render::EvalReport;
pub use model::{ActiveModel, Model, ModelContext, ModelState};
pub use plugins::{CheckpointPlugin, MetricsFilePlugin};
pub use session::{Quality, Session, StepRecord, check_scene_settings};
