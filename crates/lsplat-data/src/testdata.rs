//! Where the real test data lives, for tests and benches.
//!
//! Tests that read real scenes (splats, cameras, images; see
//! `shared/data/PROVENANCE.md`) find them through the `LSPLAT_TEST_DATA` environment
//! variable, which defaults to `../shared/data` beside the workspace root. In a fresh
//! clone without that folder such a test prints one `SKIPPED (…)` line and passes —
//! unless `LSPLAT_REQUIRE_DATA=1` (CI sets it), which makes missing data a failure.
//!
//! ```no_run
//! let Some(data) = lsplat_data::testdata::test_data() else { return };
//! let ply = data.join("splats/playcanvas_biker.inria_sh0.ply");
//! ```

use std::path::PathBuf;

/// The test data folder named by `LSPLAT_TEST_DATA`, or `../shared/data` beside the
/// workspace root. It may not exist.
pub fn data_dir() -> PathBuf {
    match std::env::var_os("LSPLAT_TEST_DATA") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        // CARGO_MANIFEST_DIR is <repo>/crates/lsplat-data: three levels up is <repo>/..
        _ => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(3)
            .unwrap_or(std::path::Path::new(".."))
            .join("shared/data"),
    }
}

/// The test data folder, or `None` after printing one `SKIPPED (…)` line naming the
/// running test when it is absent. Panics instead when `LSPLAT_REQUIRE_DATA=1`.
pub fn test_data() -> Option<PathBuf> {
    let dir = data_dir();
    if dir.is_dir() {
        return Some(dir);
    }
    let required = std::env::var("LSPLAT_REQUIRE_DATA").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "LSPLAT_REQUIRE_DATA=1 but the test data folder {} is missing (set LSPLAT_TEST_DATA)",
        dir.display()
    );
    let thread = std::thread::current();
    eprintln!(
        "SKIPPED ({}: no test data at {}; set LSPLAT_TEST_DATA to the shared data folder)",
        thread.name().unwrap_or("test"),
        dir.display()
    );
    None
}

/// `rel` inside the test data folder, or `None` (skipped) as [`test_data`] says.
pub fn test_file(rel: &str) -> Option<PathBuf> {
    test_data().map(|d| d.join(rel))
}
