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
    /// The schedule could not be built.
    #[error("schedule: {0}")]
    Schedule(String),
}
