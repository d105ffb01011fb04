//! Every plugin op's kernel, and the viewer's (`lsplat_view::ops`, `segment_ops`,
//! `jpeg_ops`), compiles with NVRTC (sm_80, sm_90) and hiprtc (gfx90a
//! wave64, gfx1030 wave32, `-Wall -Wextra -Werror`) exactly as the GPU runtimes
//! compile it (headers spliced, the engine's defines plus the op's). Skips without
//! the compilers unless `LSPLAT_REQUIRE_NVRTC=1` / `LSPLAT_REQUIRE_HIPRTC=1` (CI).

use lsplat_device::DeviceOp;

/// Every op of every plugin in `plugins/`, and the viewer's.
fn plugin_ops() -> Vec<Box<dyn DeviceOp>> {
    let mut ops = robust_cosine::ops::all();
    ops.extend(langsplat_v2::ops::all());
    ops.extend(
        lsplat_view::ops::ViewOp::all()
            .into_iter()
            .map(|op| Box::new(op) as Box<dyn DeviceOp>),
    );
    ops.extend(
        lsplat_view::segment_ops::SegmentOp::all()
            .into_iter()
            .map(|op| Box::new(op) as Box<dyn DeviceOp>),
    );
    ops.extend(
        lsplat_view::jpeg_ops::JpegOp::all()
            .into_iter()
            .map(|op| Box::new(op) as Box<dyn DeviceOp>),
    );
    ops
}

/// `(label, file name, source, defines)` of each op's kernel.
#[cfg(any(feature = "cuda", feature = "hip"))]
fn sources() -> Vec<(String, String, String, Vec<(String, String)>)> {
    plugin_ops()
        .iter()
        .map(|op| {
            let k = op.kernel();
            let file = format!("{}.cu", op.plugin());
            let mut defines = lsplat_kernels::plugin_defines();
            defines.extend(k.defines.iter().cloned());
            (
                format!("plugin {}, op {}", op.plugin(), op.name()),
                file.clone(),
                lsplat_kernels::plugin_source(&file, k.source),
                defines,
            )
        })
        .collect()
}

#[test]
fn every_plugin_op_names_its_plugin_and_kernel() {
    let ops = plugin_ops();
    assert_eq!(ops.len(), 14 + 9 + 6 + 3);
    for op in &ops {
        let k = op.kernel();
        assert!(
            k.source.contains(k.entry),
            "{} lacks {}",
            op.name(),
            k.entry
        );
        assert!(k.source.contains("#include \"compat.h\""), "{}", op.name());
        assert!(k.block > 0);
    }
}

#[cfg(feature = "cuda")]
#[test]
fn plugin_kernels_compile_with_nvrtc() {
    use lsplat_gpu::cuda::nvrtc;
    if !nvrtc::nvrtc_available() {
        let required = std::env::var("LSPLAT_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
        assert!(!required, "LSPLAT_REQUIRE_NVRTC=1 but {}", nvrtc::NO_NVRTC);
        eprintln!("SKIPPED: {}", nvrtc::NO_NVRTC);
        return;
    }
    for (label, file, src, defines) in sources() {
        for arch in ["sm_80", "sm_90"] {
            let c = nvrtc::compile_source(&label, &file, &src, &nvrtc::flags(&defines, arch, true))
                .unwrap_or_else(|e| panic!("{label} ({arch}): {e}"));
            assert!(!c.cubin.is_empty());
            assert!(!c.log.contains("warning"), "{label} ({arch}): {}", c.log);
        }
    }
}

#[cfg(feature = "hip")]
#[test]
fn plugin_kernels_compile_with_hiprtc() {
    use lsplat_gpu::hip::hiprtc;
    if let Err(e) = hiprtc::hiprtc_version() {
        let required = std::env::var("LSPLAT_REQUIRE_HIPRTC").is_ok_and(|v| v == "1");
        assert!(!required, "LSPLAT_REQUIRE_HIPRTC=1 but {e}");
        eprintln!("SKIPPED: {e}");
        return;
    }
    for (label, file, src, defines) in sources() {
        for (arch, warp) in [("gfx90a", 64), ("gfx1030", 32)] {
            let mut flags = hiprtc::flags(&defines, arch, warp).unwrap();
            flags.extend(["-Wall", "-Wextra", "-Werror"].map(String::from));
            let c = hiprtc::compile_source(&label, &file, &src, &flags)
                .unwrap_or_else(|e| panic!("{label} ({arch}, wave{warp}): {e}"));
            assert!(c.log.is_empty(), "{label} ({arch}): {}", c.log);
        }
    }
}
