//! Helpers of the model tests: the Python with the reference packages, and the ONNX
//! Runtime library.

#![allow(dead_code)] // not every test file uses every helper

use std::path::{Path, PathBuf};
use std::process::Command;

fn required(var: &str) -> bool {
    std::env::var(var).as_deref() == Ok("1")
}

/// LSPLAT_PYTHON, or None after one SKIPPED line — a failure under
/// LSPLAT_REQUIRE_PYTHON=1.
pub fn python(what: &str) -> Option<String> {
    let py = std::env::var("LSPLAT_PYTHON")
        .ok()
        .filter(|p| !p.is_empty());
    if py.is_none() {
        assert!(
            !required("LSPLAT_REQUIRE_PYTHON"),
            "LSPLAT_REQUIRE_PYTHON=1 but LSPLAT_PYTHON is not set"
        );
        eprintln!(
            "SKIPPED ({what}): set LSPLAT_PYTHON to a python with numpy, onnx, onnxruntime, ftfy, regex, pillow and open_clip_torch (--no-deps)"
        );
    }
    py
}

/// Runs `script` (in this folder) with `args`; `None` (SKIPPED) when the Python lacks a
/// package, unless LSPLAT_REQUIRE_PYTHON=1.
pub fn run_script(py: &str, script: &str, args: &[&str], what: &str) -> Option<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
    let out = Command::new(py)
        .arg(&path)
        .args(args)
        .output()
        .expect("runs python");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let missing = err.contains("ModuleNotFoundError") || err.contains("is not installed");
        if missing && !required("LSPLAT_REQUIRE_PYTHON") {
            eprintln!("SKIPPED ({what}): {}", err.lines().last().unwrap_or(""));
            return None;
        }
        panic!("{} failed:\n{err}", path.display());
    }
    Some(())
}

/// The ONNX Runtime library: ORT_DYLIB_PATH, else the one of LSPLAT_PYTHON's
/// onnxruntime package; None after one SKIPPED line — a failure under
/// LSPLAT_REQUIRE_ORT=1.
pub fn ort_library(what: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let found = std::env::var("LSPLAT_PYTHON").ok().and_then(|py| {
        let out = Command::new(py)
            .args([
                "-c",
                "import glob, os, onnxruntime; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', 'libonnxruntime.so*')))[-1])",
            ])
            .output()
            .ok()?;
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !s.is_empty()).then(|| PathBuf::from(s))
    });
    if found.is_none() {
        assert!(
            !required("LSPLAT_REQUIRE_ORT"),
            "LSPLAT_REQUIRE_ORT=1 but no ONNX Runtime: set ORT_DYLIB_PATH, or LSPLAT_PYTHON to a python with onnxruntime"
        );
        eprintln!(
            "SKIPPED ({what}): no ONNX Runtime (set ORT_DYLIB_PATH or LSPLAT_PYTHON with onnxruntime)"
        );
    }
    found
}
