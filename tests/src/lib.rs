//! Shared helpers of the integration tests: an independent float64 reference
//! renderer and random scenes.

pub mod reference;
pub mod scenes;
