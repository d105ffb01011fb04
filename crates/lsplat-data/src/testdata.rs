//! Paths of the shared real test data (`../shared/data` beside the workspace root).

use std::path::PathBuf;

/// `../shared/data/<rel>` resolved from the workspace root.
pub(crate) fn path(rel: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}
