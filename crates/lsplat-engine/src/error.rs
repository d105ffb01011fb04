/// Errors of the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A device op failed.
    #[error(transparent)]
    Device(#[from] lsplat_device::DeviceError),
    /// The scene's data is unusable.
    #[error(transparent)]
    Data(#[from] lsplat_data::DataError),
    /// The configuration is unusable for this scene.
    #[error("configuration: {0}")]
    Config(String),
    /// Training diverged: a loss or parameter is NaN or infinite.
    #[error("training diverged: {what} is not finite at step {step} (0-based)")]
    NonFinite {
        /// What: `the loss`, or the tensor (`params`, `adam_m`, `adam_v`).
        what: String,
        /// The first step found non-finite (the loss is read back every `log.every`
        /// steps, the parameters at each checkpoint).
        step: u64,
    },
    /// A collective failed, or the ranks disagree.
    #[error(transparent)]
    Dist(#[from] lsplat_dist::DistError),
    /// The schedule could not be built.
    #[error("schedule: {0}")]
    Schedule(String),
}
