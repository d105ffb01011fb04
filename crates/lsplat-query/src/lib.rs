//! From rendered features to answers: LangSplat's relevancy for text queries
//! ([`relevancy`]), pictures of feature images and heat maps ([`picture`]), LERF-OVS
//! label files ([`labels`]), LangSplat's LERF evaluation protocol ([`lerf`]), its 3D
//! protocol's selection of Gaussians ([`select`]), the summaries both report
//! ([`score`]), the 3D-OVS benchmark ([`ovs`]) and per-Gaussian segmentation against a
//! labelled point cloud ([`pointseg`], with the k-d tree of [`knn`]).
//!
//! Plain functions over host arrays (`[pixels, channels]` row-major images, `[h, w]`
//! maps); rendering and file handling live in the command-line tool.

pub mod error;
pub mod knn;
pub mod labels;
pub mod lerf;
pub mod ovs;
pub mod picture;
pub mod pointseg;
pub mod relevancy;
pub mod score;
pub mod select;

pub use error::QueryError;
pub use relevancy::{CANONICAL, normalize_rows, relevancy};
