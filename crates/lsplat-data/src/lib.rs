//! Scenes and formats of lsplat-engine.
//!
//! A [`SceneData`] is what training consumes: frozen Gaussians, cameras, and per
//! camera the [`ImageLabels`] of the trained level (valid pixels, their mask ids, and
//! the mask feature table). It comes from the embedded synthetic demo ([`demo`]) or
//! from files users already have.

pub mod cameras;
pub mod dataset;
pub mod demo;
pub mod embeddings;
pub mod error;
pub mod io;
pub mod labels;
pub mod langsplat;
pub mod npy;
pub mod npz;
pub mod output;
pub mod ply;
pub mod run;
pub mod run_dir;
pub mod scene;
pub mod tables;
pub mod testdata;

pub use error::DataError;
pub use labels::{ImageLabels, SceneData};
