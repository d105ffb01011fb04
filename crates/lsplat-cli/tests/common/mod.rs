//! Helpers shared by the binary's integration tests.

pub mod browser;
pub mod cli;

/// The Python with the real clients (pyarrow, plyfile, safetensors) named by
/// LSPLAT_PYTHON, or None to skip — unless LSPLAT_REQUIRE_PYTHON=1, which makes a
/// missing client a failure.
#[allow(dead_code)] // not every test crate runs the Python clients
pub fn python() -> Option<String> {
    let py = std::env::var("LSPLAT_PYTHON").ok();
    if py.is_none() {
        assert!(
            std::env::var("LSPLAT_REQUIRE_PYTHON").as_deref() != Ok("1"),
            "LSPLAT_REQUIRE_PYTHON=1 but LSPLAT_PYTHON is not set"
        );
        eprintln!(
            "SKIPPED the Python client checks: set LSPLAT_PYTHON to a python with pyarrow, plyfile and safetensors"
        );
    }
    py
}
