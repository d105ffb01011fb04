//! From rendered features to answers: LangSplat's relevancy for text queries
//! ([`relevancy`]), pictures of feature images and heat maps ([`picture`]), LERF-OVS
//! label files ([`labels`]) and LangSplat's LERF evaluation protocol ([`lerf`]).
//!
//! Plain functions over host arrays (`[pixels, channels]` row-major images, `[h, w]`
//! maps); rendering and file handling live in the command-line tool.

pub mod error;
pub mod labels;
pub mod lerf;
pub mod picture;
pub mod relevancy;

pub use error::QueryError;
pub use relevancy::{CANONICAL, normalize_rows, relevancy};
