//! Compiles every kernel family with hiprtc for gfx90a (CDNA, wave64) — and for gfx1030
//! (RDNA, wave32: compat.h's other HIP branch) — both tile sizes and two channel counts,
//! with `-Wall -Wextra -Werror`, and fails on any error or warning. No GPU is needed.
//!
//! Skips (passes with a message) when hiprtc cannot be loaded, unless
//! `LSPLAT_REQUIRE_HIPRTC=1`, which CI sets (`.ci/run` installs Debian's HIP packages).

#![cfg(feature = "hip")]

mod common;

use lsplat_gpu::hip::{WARP_PROBE, api, hiprtc};

const STRICT: [&str; 3] = ["-Wall", "-Wextra", "-Werror"];

fn hiprtc_or_skip() -> bool {
    match hiprtc::hiprtc_version() {
        Ok((_, path)) => {
            let rt = lsplat_gpu::hip::runtime_version().unwrap_or_default();
            eprintln!("hiprtc from {path}; {rt}");
            true
        }
        Err(e) => {
            let required = std::env::var("LSPLAT_REQUIRE_HIPRTC").is_ok_and(|v| v == "1");
            assert!(!required, "LSPLAT_REQUIRE_HIPRTC=1 but {e}");
            eprintln!("SKIPPED: {e}");
            false
        }
    }
}

#[test]
fn every_kernel_compiles_cleanly() {
    if !hiprtc_or_skip() {
        return;
    }
    // gfx90a runs wave64 only; gfx1030 (RDNA) is compiled for wave32.
    common::compile_every_family(&["gfx90a", "gfx1030"], |kernel, tile, c, arch| {
        let warp = if arch == "gfx90a" { 64 } else { 32 };
        hiprtc::compile(kernel, tile, c, arch, warp, &STRICT).map(|c| c.log)
    });
}

#[test]
fn the_warp_probe_compiles_for_both_wavefront_sizes() {
    if !hiprtc_or_skip() {
        return;
    }
    for (arch, warp) in [("gfx90a", 64), ("gfx1030", 32), ("gfx1030", 64)] {
        let mut flags = hiprtc::flags(&[], arch, warp).unwrap();
        flags.extend(STRICT.iter().map(|s| s.to_string()));
        let c = hiprtc::compile_source("probe", "probe.cu", WARP_PROBE, &flags)
            .unwrap_or_else(|e| panic!("{arch} wave{warp}: {e}"));
        assert!(c.log.is_empty(), "{arch} wave{warp}: {}", c.log);
    }
}

#[test]
fn errors_and_warnings_are_reported() {
    if !hiprtc_or_skip() {
        return;
    }
    let src = "extern \"C\" __global__ void k(float* p) { int unused = 3; p[0] = 1.0f; }";
    let mut flags = hiprtc::flags(&[], "gfx90a", 64).unwrap();
    flags.push("-Wall".into());
    let c = hiprtc::compile_source("probe", "probe.cu", src, &flags).expect("compiles");
    assert!(c.log.contains("unused"), "no warning in log: {:?}", c.log);
    let mut strict = flags.clone();
    strict.push("-Werror".into());
    let e = hiprtc::compile_source("probe", "probe.cu", src, &strict).unwrap_err();
    assert!(e.to_string().contains("unused"), "{e}");
    let bad = hiprtc::compile_source("probe", "probe.cu", "this is not C++", &flags);
    assert!(bad.is_err());
}

/// Without a GPU (CI, this machine) the runtime says so clearly instead of failing
/// later; with one, it opens.
#[test]
fn opening_without_a_gpu_is_a_clear_error() {
    match lsplat_gpu::hip::Hip::new(0) {
        Ok(_) => eprintln!("a HIP device is present"),
        Err(e) => {
            let m = e.to_string();
            eprintln!("{m}");
            assert!(m.contains("hip"), "{m}");
            let known = [api::NO_HIP, "no usable AMD GPU", "no AMD GPU found"];
            assert!(known.iter().any(|k| m.contains(k)), "unexpected error: {m}");
        }
    }
}
