//! SAM's real architectures as ONNX graphs (scripts/sam_full_onnx.py: segment-anything's
//! ViT image encoder, MobileSAM's TinyViT, the prompt encoder and mask decoder, and
//! EfficientSAM's ViT, prompt encoder and mask decoder; seeded random weights) at their
//! tiny test sizes, run by the engine's ONNX Runtime sessions, against a float64 NumPy
//! reference written from the torch modules (scripts/sam_numpy.py) on a real photo: the
//! graphs compute the families' functions, not only their shapes. The full sizes
//! (ViT-H/L/B, TinyViT-5M, EfficientSAM Ti/S) take the same code paths and are for
//! benchmarks only (benches/preprocess_sam.sh).

use std::path::{Path, PathBuf};
use std::process::Command;

use lsplat_core::preprocess::PreprocessConfig;
use lsplat_data::io::write_npy_f32;
use lsplat_data::npy::read_npy;
use lsplat_prep::model::{ImageEncoder, InputResize, MaskDecoder, encoder_input, stretch_input};
use lsplat_prep::{Timings, amg, image};

fn python() -> Option<String> {
    let py = std::env::var("LSPLAT_PYTHON")
        .ok()
        .filter(|p| !p.is_empty());
    if py.is_none() {
        assert!(
            std::env::var("LSPLAT_REQUIRE_PYTHON").as_deref() != Ok("1"),
            "LSPLAT_REQUIRE_PYTHON=1 but LSPLAT_PYTHON is not set"
        );
        eprintln!(
            "SKIPPED the SAM graph reference: set LSPLAT_PYTHON to a python with numpy, onnx and onnxruntime"
        );
    }
    py
}

fn ort_library(py: &str) -> PathBuf {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let out = Command::new(py)
        .args([
            "-c",
            "import glob, os, onnxruntime; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', 'libonnxruntime.so*')))[-1])",
        ])
        .output()
        .expect("runs python");
    assert!(out.status.success(), "onnxruntime is not installed in {py}");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn script(py: &str, name: &str, args: &[&std::ffi::OsStr]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name);
    let out = Command::new(py).arg(&path).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Largest |a − b| relative to max(1, max |b|).
fn check_close(what: &str, got: &[f32], dir: &Path, name: &str, shape: &[usize]) {
    let want = read_npy(&dir.join(name)).unwrap();
    assert_eq!(want.shape, shape, "{what}: reference shape");
    assert_eq!(got.len(), want.data.len(), "{what}: length");
    let scale = want.data.iter().fold(1f32, |m, v| m.max(v.abs()));
    let err = got
        .iter()
        .zip(&want.data)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    eprintln!("{what}: max |engine − reference| = {err:.2e} (scale {scale:.3})");
    assert!(
        err <= 1e-4 * scale,
        "{what}: max difference {err} exceeds 1e-4 × {scale}"
    );
    // Not vacuous: the outputs vary.
    let spread = want
        .data
        .iter()
        .fold(0f32, |m, v| m.max((v - want.data[0]).abs()));
    assert!(spread > 1e-2, "{what}: the reference is nearly constant");
}

#[test]
fn sam_architectures_match_the_numpy_reference() {
    let Some(py) = python() else { return };
    let Some(photo) = lsplat_data::testdata::test_file("fern_llff/images_8/image001.png") else {
        return;
    };
    let rt = lsplat_models::runtime::load(Some(&ort_library(&py))).unwrap();
    let opts = lsplat_models::session::SessionOptions::default();
    let img = image::read_rgb(&photo).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for encoder in ["tiny_vit", "tiny_vit_t", "tiny_esam"] {
        let dir = tmp.path().join(encoder);
        script(
            &py,
            "sam_full_onnx.py",
            &[
                "make".as_ref(),
                dir.as_os_str(),
                "--encoder".as_ref(),
                encoder.as_ref(),
            ],
        );
        let (mut enc, mut dec) = lsplat_prep::onnx::load_sam(&dir, rt, &opts).unwrap();
        let side = enc.input_size();
        assert_eq!(side, 128);
        let stretch = encoder == "tiny_esam";
        assert_eq!(
            enc.resize() == InputResize::Stretch,
            stretch,
            "{encoder}: sam.json"
        );
        let input = match stretch {
            true => stretch_input(&img, side),
            false => encoder_input(&img, side).0,
        };
        let emb = enc.encode(&input).unwrap();
        // Corners, the centre, fractional pixels.
        let points = [
            [0.0, 0.0],
            [127.0, 95.0],
            [64.0, 48.0],
            [3.25, 90.5],
            [100.7, 7.1],
        ];
        let d = dec.decode(&emb, &points).unwrap();
        let io = dir.join("io");
        std::fs::create_dir_all(&io).unwrap();
        write_npy_f32(&io.join("image.npy"), &[1, 3, side, side], &input).unwrap();
        let flat: Vec<f32> = points.iter().flatten().copied().collect();
        write_npy_f32(&io.join("points.npy"), &[points.len(), 1, 2], &flat).unwrap();
        let refdir = dir.join("ref");
        script(
            &py,
            "sam_numpy.py",
            &[
                dir.as_os_str(),
                "--image".as_ref(),
                io.join("image.npy").as_os_str(),
                "--points".as_ref(),
                io.join("points.npy").as_os_str(),
                "--out".as_ref(),
                refdir.as_os_str(),
            ],
        );
        let e = side / 16;
        assert_eq!(emb.shape, [1, 32, e, e]);
        check_close(
            &format!("{encoder} embeddings"),
            &emb.data,
            &refdir,
            "image_embeddings.npy",
            &[1, 32, e, e],
        );
        let b = points.len();
        check_close(
            &format!("{encoder} mask logits"),
            &d.masks,
            &refdir,
            "low_res_masks.npy",
            &[b, 3, 4 * e, 4 * e],
        );
        check_close(
            &format!("{encoder} IoU predictions"),
            &d.iou,
            &refdir,
            "iou_predictions.npy",
            &[b, 3],
        );
        // The generator runs on the real architecture end to end (random weights, so
        // nothing is asserted about the masks themselves).
        let cfg = PreprocessConfig {
            points_per_side: 2,
            crop_n_layers: 0,
            pred_iou_thresh: 0.0,
            stability_score_thresh: 0.0,
            threads: 1,
            ..PreprocessConfig::default()
        };
        let mut t = Timings::default();
        amg::generate(&img, &cfg, &mut enc, &mut dec, &mut t).unwrap();
        assert!(t.encoder > 0.0 && t.decoder > 0.0);
    }
}
