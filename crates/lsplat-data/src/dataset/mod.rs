//! Engine datasets: `features.parquet` and `masks.parquet` (Arrow/Parquet, zstd),
//! readable by pyarrow, polars and DuckDB. See `docs/formats.md` for the schemas.
//!
//! - `features.parquet`: one row per mask feature: `image`, `level`, `mask_id` (the
//!   row of the image's feature table), `feature` FixedSizeList<Float32, D>.
//! - `masks.parquet`: one row per (image, level): size, counts and the segmentation
//!   map run-length encoded ([`rle::Runs`]); pixels outside every run are `-1`.
//!
//! Both files hold one row group per image, so writing and reading stream image by
//! image; a dense `[D, H, W]` target is never built.

pub mod features;
pub mod import;
pub mod read;
pub mod rle;
pub mod schema;
pub mod write;

pub use features::{FeatureRows, map_dataset_features, read_feature_rows};
pub use import::{import_langsplat, import_langsplat_with_progress};
pub use read::{load_dataset_labels, load_dataset_levels};
pub use rle::Runs;
pub use schema::{FEATURES_FILE, MASKS_FILE, features_schema, masks_schema};
pub use write::{DatasetWriter, ImportSummary};

#[cfg(test)]
mod codec_tests;
#[cfg(test)]
mod tests;
