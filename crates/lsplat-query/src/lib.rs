//! From rendered features to answers: LangSplat's relevancy for text queries
//! ([`relevancy`]), pictures of feature images and heat maps ([`picture`]), LERF-OVS
//! label files ([`labels`]), LangSplat's LERF evaluation protocol ([`lerf`]), its 3D
//! protocol's selection of Gaussians ([`select`]), the summaries both report
//! ([`score`]), the 3D-OVS benchmark ([`ovs`]) and per-Gaussian segmentation against a
//! labelled point cloud ([`pointseg`], with the k-d tree of [`knn`]).
//!
//! Plain functions over host arrays (`[pixels, channels]` row-major images, `[h, w]`
//! maps), and [`lift`]: rendered features (a LangSplat V1 run's codes through its
//! autoencoder, a LangSplatV2 run's code weights through its codebook, or CLIP-width
//! features) as unit features comparable with text, and the relevancy maps of whole
//! rendered images. File handling lives in the command-line tool and the viewer.

pub mod error;
pub mod knn;
pub mod labels;
pub mod lerf;
pub mod lift;
pub mod ovs;
pub mod picture;
pub mod pointseg;
pub mod relevancy;
pub mod score;
pub mod select;
pub mod text;

pub use error::QueryError;
pub use lift::{ImageRelevancy, Lift, image_relevancy, text_rows};
pub use relevancy::{CANONICAL, normalize_rows, relevancy};
pub use text::TextEncoder;
