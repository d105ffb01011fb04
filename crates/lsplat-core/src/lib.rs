//! Core types of lsplat-engine.
//!
//! Everything here is plain data and plain functions: Gaussians as structure-of-arrays,
//! pinhole cameras, the tile grid, the rasterizer constants (defined once, passed to
//! every backend and to the GPU kernels as defines), a seeded random number generator
//! and the typed configuration. Nothing here knows about the ECS or a device.

pub mod camera;
pub mod config;
pub mod config_doc;
pub mod constants;
pub mod error;
pub mod gaussians;
pub mod memory;
pub mod preprocess;
pub mod rng;
pub mod tiles;

// The configuration derive names this crate by its path, also from inside it.
extern crate self as lsplat_core;

pub use camera::Camera;
pub use config::Config;
pub use error::CoreError;
pub use gaussians::Gaussians;
pub use rng::Rng;
pub use tiles::TileGrid;
