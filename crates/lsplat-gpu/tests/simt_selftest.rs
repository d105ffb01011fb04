//! kernels/simt.h on its own (no Rust host): a kernel with barriers, barrier reductions,
//! shuffles, ballots and shared memory under every schedule, checked against values the
//! C++ driver computes (`kernels/tests/simt_selftest.cpp`). Built natively and, when a
//! cross compiler and qemu-user are present, for aarch64: the fiber context switch of
//! both supported architectures runs in CI (`LSPLAT_REQUIRE_AARCH64=1`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn kernels() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels")
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Builds the self-test with `cxx` for warp `warp` and runs it (through `runner` if any).
fn build_and_run(cxx: &str, extra: &[&str], runner: Option<&str>, warp: u32) {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join(format!("selftest{warp}"));
    let k = kernels();
    let out = Command::new(cxx)
        .args(["-std=c++20", "-O2", "-Wall", "-Werror"])
        .args(extra)
        .arg(format!("-DLS_WARP_SIZE={warp}"))
        .arg("-include")
        .arg(k.join("simt.h"))
        .arg(k.join("tests/simt_selftest.cpp"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cxx} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = match runner {
        Some(r) => Command::new(r).arg(&exe).output(),
        None => Command::new(&exe).output(),
    }
    .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{cxx} warp {warp}: {err}");
    assert!(err.contains("self-test passed"), "{err}");
}

#[test]
fn native_selftest_passes_at_both_warp_sizes() {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    if !have(&cxx) {
        let required = std::env::var("LSPLAT_REQUIRE_SIMT").is_ok_and(|v| v == "1");
        assert!(!required, "LSPLAT_REQUIRE_SIMT=1 but {cxx} is missing");
        eprintln!("SKIPPED (no {cxx})");
        return;
    }
    for warp in [32, 64] {
        build_and_run(&cxx, &[], None, warp);
    }
}

#[test]
fn aarch64_selftest_passes_under_qemu() {
    let (cxx, qemu) = ("aarch64-linux-gnu-g++", "qemu-aarch64-static");
    if !have(cxx) || !have(qemu) {
        let required = std::env::var("LSPLAT_REQUIRE_AARCH64").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "LSPLAT_REQUIRE_AARCH64=1 but {cxx} or {qemu} is missing \
             (apt-get install g++-aarch64-linux-gnu qemu-user-static)"
        );
        eprintln!("SKIPPED (no {cxx} / {qemu}: the aarch64 context switch is not exercised)");
        return;
    }
    for warp in [32, 64] {
        build_and_run(cxx, &["-static"], Some(qemu), warp);
    }
}
