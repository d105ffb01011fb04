//! The engine's mask generator, clean-up, mask NMS, crops and segmentation maps
//! against the independent NumPy/OpenCV/Pillow reference (`reference/amg_reference.py`),
//! both driven by the same decoder outputs: the reference records every decoder call
//! and encoder input, the engine replays them (and checks its own encoder inputs and
//! prompt points against the recorded ones, bit for bit). Real images from
//! `shared/data` (fern, snowmiku).

use std::path::{Path, PathBuf};
use std::process::Command;

use lsplat_core::preprocess::PreprocessConfig;
use lsplat_data::npy::read_npy;
use lsplat_prep::bitmask::BitMask;
use lsplat_prep::crops::clip_crop;
use lsplat_prep::levels::{LevelMask, arrays, clean_lists, nms_lists};
use lsplat_prep::model::{ClipEncoder, Decoded, Embedding, ImageEncoder, InputResize, MaskDecoder};
use lsplat_prep::resize::Image8;
use lsplat_prep::{PrepError, Timings, amg, image};

const LEVELS: [&str; 4] = ["default", "s", "m", "l"];

fn python() -> Option<String> {
    let py = std::env::var("LSPLAT_PYTHON").ok();
    if py.is_none() {
        assert!(
            std::env::var("LSPLAT_REQUIRE_PYTHON").as_deref() != Ok("1"),
            "LSPLAT_REQUIRE_PYTHON=1 but LSPLAT_PYTHON is not set"
        );
        eprintln!(
            "SKIPPED the reference comparison: set LSPLAT_PYTHON to a python with numpy, opencv-python-headless and pillow"
        );
    }
    py
}

/// Replays the reference's recorded encoder inputs and decoder calls.
struct Replay {
    dir: PathBuf,
    enc: usize,
    dec: usize,
    resize: InputResize,
}

impl Replay {
    fn new(dir: &Path, resize: InputResize) -> Replay {
        Replay {
            dir: dir.to_path_buf(),
            enc: 0,
            dec: 0,
            resize,
        }
    }
}

/// The reference's `--resize` value.
fn resize_arg(r: InputResize) -> &'static str {
    match r {
        InputResize::LongestSide => "longest_side",
        InputResize::Stretch => "stretch",
    }
}

fn npy(dir: &Path, name: &str) -> (Vec<usize>, Vec<f32>) {
    let a = read_npy(&dir.join(name)).unwrap_or_else(|e| panic!("{e}"));
    (a.shape, a.data)
}

impl ImageEncoder for Replay {
    fn input_size(&self) -> usize {
        1024
    }
    fn resize(&self) -> InputResize {
        self.resize
    }
    fn encode(&mut self, image: &[f32]) -> Result<Embedding, PrepError> {
        let (_, want) = npy(&self.dir, &format!("enc_{}.npy", self.enc));
        let diff = image
            .iter()
            .zip(&want)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(image.len(), want.len());
        assert_eq!(
            diff, 0,
            "encoder input {} differs in {diff} values",
            self.enc
        );
        self.enc += 1;
        Ok(Embedding {
            shape: vec![1],
            data: vec![self.enc as f32],
        })
    }
}

impl MaskDecoder for Replay {
    fn decode(&mut self, _: &Embedding, points: &[[f32; 2]]) -> Result<Decoded, PrepError> {
        let c = self.dec;
        let (_, want) = npy(&self.dir, &format!("dec_{c}_points.npy"));
        let got: Vec<f32> = points.iter().flatten().copied().collect();
        assert_eq!(got.len(), want.len(), "call {c}: number of prompts");
        for (a, b) in got.iter().zip(&want) {
            assert_eq!(a.to_bits(), b.to_bits(), "call {c}: prompt {a} vs {b}");
        }
        let (shape, masks) = npy(&self.dir, &format!("dec_{c}_masks.npy"));
        let (_, iou) = npy(&self.dir, &format!("dec_{c}_iou.npy"));
        self.dec += 1;
        Ok(Decoded {
            masks,
            side: shape[3],
            iou,
        })
    }
}

/// A stand-in CLIP: the mean colour of the crop and two moments.
struct FakeClip;

impl ClipEncoder for FakeClip {
    fn dim(&self) -> usize {
        4
    }
    fn encode(&mut self, crops: &[Image8]) -> Result<Vec<f32>, PrepError> {
        Ok(crops
            .iter()
            .flat_map(|c| {
                let mut s = [1.0f32; 4];
                for (i, &v) in c.data.iter().enumerate() {
                    s[i % 3] += v as f32;
                }
                s
            })
            .collect())
    }
}

/// Masks saved by the reference as packed bits `[N, H, ceil(W/8)]`.
fn masks(dir: &Path, name: &str, w: u32, h: u32) -> Vec<Vec<u8>> {
    let (shape, bits) = npy(dir, name);
    let (n, wb) = (shape[0], shape[2]);
    (0..n)
        .map(|i| {
            (0..h as usize)
                .flat_map(|y| (0..w as usize).map(move |x| (x, y)))
                .map(|(x, y)| {
                    let byte = bits[(i * h as usize + y) * wb + x / 8] as u8;
                    (byte >> (7 - x % 8)) & 1
                })
                .collect()
        })
        .collect()
}

fn same_masks(stage: &str, level: &str, got: &[&BitMask], want: &[Vec<u8>]) {
    assert_eq!(got.len(), want.len(), "{stage} {level}: number of masks");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = g.to_bytes();
        let diff = g.iter().zip(w).filter(|(a, b)| a != b).count();
        assert_eq!(
            diff, 0,
            "{stage} {level}: mask {i} differs in {diff} pixels"
        );
    }
}

fn compare(image_path: &Path, points: u32, nms_max_dim: u32, resize: InputResize) {
    let Some(py) = python() else { return };
    let out = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/amg_reference.py");
    let st = Command::new(&py)
        .arg(&script)
        .args(["--image".as_ref(), image_path.as_os_str()])
        .args(["--out".as_ref(), out.path().as_os_str()])
        .args([
            "--points",
            &points.to_string(),
            "--nms-max-dim",
            &nms_max_dim.to_string(),
            "--resize",
            resize_arg(resize),
        ])
        .status()
        .expect("run the reference");
    assert!(st.success(), "reference failed on {}", image_path.display());
    let dir = out.path();
    let img = image::read_rgb(image_path).unwrap();
    let (w, h) = (img.width as u32, img.height as u32);
    let cfg = PreprocessConfig {
        points_per_side: points,
        nms_max_dim,
        threads: 2,
        ..PreprocessConfig::default()
    };
    let mut replay = Replay::new(dir, resize);
    let mut t = Timings::default();
    let mut dec = Replay::new(dir, resize);
    let generated = amg::generate(&img, &cfg, &mut replay, &mut dec, &mut t).unwrap();
    assert_eq!(replay.enc, 5, "one encoder call per crop");
    for (l, name) in LEVELS.iter().enumerate() {
        let got: Vec<&BitMask> = generated.lists[l]
            .iter()
            .map(|&r| &generated.records[r].mask)
            .collect();
        same_masks(
            "generator",
            name,
            &got,
            &masks(dir, &format!("amg_{name}.npy"), w, h),
        );
        let (_, scores) = npy(dir, &format!("amg_{name}_scores.npy"));
        for (k, &r) in generated.lists[l].iter().enumerate() {
            let rec = &generated.records[r];
            assert_eq!(rec.iou as f64, scores[2 * k] as f64, "{name} {k}: iou");
            assert_eq!(rec.stability, scores[2 * k + 1], "{name} {k}: stability");
        }
    }
    let cleaned = clean_lists(&generated, &cfg, &mut t);
    for (l, name) in LEVELS.iter().enumerate() {
        let got: Vec<&BitMask> = cleaned[l].iter().map(|m| &m.mask).collect();
        same_masks(
            "clean-up",
            name,
            &got,
            &masks(dir, &format!("clean_{name}.npy"), w, h),
        );
    }
    let finals: [Vec<LevelMask>; 4] = nms_lists(&generated, cleaned, &cfg, &mut t);
    let mut n_final = 0;
    for (l, name) in LEVELS.iter().enumerate() {
        let got: Vec<&BitMask> = finals[l].iter().map(|m| &m.mask).collect();
        same_masks(
            "mask NMS",
            name,
            &got,
            &masks(dir, &format!("final_{name}.npy"), w, h),
        );
        let (_, crops) = npy(dir, &format!("crops_{name}.npy"));
        for (i, m) in finals[l].iter().enumerate() {
            let c = clip_crop(&img, &m.mask);
            let want = &crops[i * 224 * 224 * 3..(i + 1) * 224 * 224 * 3];
            let diff = c
                .data
                .iter()
                .zip(want)
                .filter(|(a, b)| **a as f32 != **b)
                .count();
            assert_eq!(diff, 0, "crop {i} of {name} differs in {diff} values");
        }
        n_final += finals[l].len();
    }
    let a = arrays(&img, &finals, &mut FakeClip, &cfg, &mut t).unwrap();
    let (_, seg) = npy(dir, "seg.npy");
    assert_eq!(a.seg, seg, "segmentation maps");
    assert_eq!(a.features.len(), n_final * 4);
    eprintln!(
        "{}: {:?} generator masks, {n_final} final, identical to the reference",
        image_path.display(),
        generated.lists.iter().map(|l| l.len()).collect::<Vec<_>>()
    );
}

#[test]
fn fern_matches_the_reference() {
    let Some(f) = lsplat_data::testdata::test_file("fern_llff/images_8/image000.png") else {
        return;
    };
    compare(&f, 6, 1024, InputResize::LongestSide);
}

/// EfficientSAM's predictor conventions (the crop stretched to 1024², points scaled
/// per axis, logits bicubic to the crop) against the reference's reading of them.
#[test]
fn fern_matches_the_reference_as_efficient_sam() {
    let Some(f) = lsplat_data::testdata::test_file("fern_llff/images_8/image000.png") else {
        return;
    };
    compare(&f, 6, 1024, InputResize::Stretch);
}

#[test]
fn snowmiku_matches_the_reference_with_downsampled_nms() {
    let Some(f) = lsplat_data::testdata::test_file("snowmiku/images_8/20240212_003919.png") else {
        return;
    };
    compare(&f, 5, 200, InputResize::LongestSide);
}

/// The ONNX Runtime library of LSPLAT_PYTHON's onnxruntime (or ORT_DYLIB_PATH).
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

/// The synthetic SAM graphs of scripts/sam_onnx.py in `dir`.
fn synthetic_sam(py: &str, dir: &Path, args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/sam_onnx.py");
    let st = Command::new(py)
        .arg(&script)
        .arg(dir)
        .args(args)
        .output()
        .expect("run sam_onnx.py");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
}

/// The generator on `sam` through ONNX Runtime (the engine's sessions) against the
/// reference running the same graphs through onnxruntime in Python (with the folder's
/// resize): identical masks at every stage, identical seg maps.
fn onnx_matches_the_reference(
    py: &str,
    image_path: &Path,
    sam: &Path,
    rt: &'static lsplat_models::Runtime,
) {
    let opts = lsplat_models::session::SessionOptions::default();
    let (mut enc, mut dec) = lsplat_prep::onnx::load_sam(sam, rt, &opts).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ref");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/amg_reference.py");
    let st = Command::new(py)
        .arg(&script)
        .args([
            "--image".as_ref(),
            image_path.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
            "--sam".as_ref(),
            sam.as_os_str(),
        ])
        .args(["--points", "4", "--resize", resize_arg(enc.resize())])
        .status()
        .unwrap();
    assert!(st.success());
    let img = image::read_rgb(image_path).unwrap();
    let (w, h) = (img.width as u32, img.height as u32);
    let cfg = PreprocessConfig {
        points_per_side: 4,
        threads: 2,
        ..PreprocessConfig::default()
    };
    let mut t = Timings::default();
    let generated = amg::generate(&img, &cfg, &mut enc, &mut dec, &mut t).unwrap();
    for (l, name) in LEVELS.iter().enumerate() {
        let got: Vec<&BitMask> = generated.lists[l]
            .iter()
            .map(|&r| &generated.records[r].mask)
            .collect();
        same_masks(
            "onnx generator",
            name,
            &got,
            &masks(&out, &format!("amg_{name}.npy"), w, h),
        );
    }
    let finals = nms_lists(
        &generated,
        clean_lists(&generated, &cfg, &mut t),
        &cfg,
        &mut t,
    );
    for (l, name) in LEVELS.iter().enumerate() {
        let got: Vec<&BitMask> = finals[l].iter().map(|m| &m.mask).collect();
        same_masks(
            "onnx final",
            name,
            &got,
            &masks(&out, &format!("final_{name}.npy"), w, h),
        );
    }
    let a = arrays(&img, &finals, &mut FakeClip, &cfg, &mut t).unwrap();
    assert_eq!(a.seg, npy(&out, "seg.npy").1, "segmentation maps");
}

/// What the ONNX tests share: the python, a fern photo, a temporary folder holding the
/// synthetic SAM graphs (made with `args`) and the ONNX Runtime.
struct OnnxCase {
    py: String,
    image: PathBuf,
    tmp: tempfile::TempDir,
    sam: PathBuf,
    rt: &'static lsplat_models::Runtime,
}

fn onnx_case(args: &[&str]) -> Option<OnnxCase> {
    let py = python()?;
    let image = lsplat_data::testdata::test_file("fern_llff/images_8/image001.png")?;
    let tmp = tempfile::tempdir().unwrap();
    let sam = tmp.path().join("sam");
    synthetic_sam(&py, &sam, args);
    let rt = lsplat_models::runtime::load(Some(&ort_library(&py))).unwrap();
    Some(OnnxCase {
        py,
        image,
        tmp,
        sam,
        rt,
    })
}

/// SAM through ONNX Runtime matches the reference, and contract errors name the file.
#[test]
fn onnx_sam_matches_the_reference_and_checks_its_contract() {
    let Some(OnnxCase {
        py,
        image,
        tmp,
        sam,
        rt,
    }) = onnx_case(&[])
    else {
        return;
    };
    let opts = lsplat_models::session::SessionOptions::default();
    onnx_matches_the_reference(&py, &image, &sam, rt);
    // Contract errors name the file.
    let bad = tmp.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::copy(sam.join("decoder.onnx"), bad.join("encoder.onnx")).unwrap();
    std::fs::copy(sam.join("decoder.onnx"), bad.join("decoder.onnx")).unwrap();
    let e = lsplat_prep::onnx::load_sam(&bad, rt, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("encoder.onnx") && e.contains("image"), "{e}");
    std::fs::copy(sam.join("encoder.onnx"), bad.join("encoder.onnx")).unwrap();
    std::fs::write(bad.join("decoder.onnx"), b"not a model").unwrap();
    let e = lsplat_prep::onnx::load_sam(&bad, rt, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("decoder.onnx"), "{e}");
    std::fs::copy(sam.join("encoder.onnx"), bad.join("decoder.onnx")).unwrap();
    let e = lsplat_prep::onnx::load_sam(&bad, rt, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("decoder.onnx") && e.contains("contract"), "{e}");
    let e = lsplat_prep::onnx::load_sam(&tmp.path().join("none"), rt, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no such SAM model folder"), "{e}");
}

/// A folder whose `sam.json` declares EfficientSAM's resize runs as EfficientSAM's
/// predictor does, through ONNX Runtime; a bad `sam.json` is an error naming it.
#[test]
fn onnx_efficient_sam_folder_matches_the_reference() {
    let Some(OnnxCase {
        py,
        image,
        sam,
        rt,
        tmp: _tmp,
    }) = onnx_case(&["--resize", "stretch"])
    else {
        return;
    };
    let opts = lsplat_models::session::SessionOptions::default();
    let (enc, _) = lsplat_prep::onnx::load_sam(&sam, rt, &opts).unwrap();
    assert_eq!(enc.resize(), InputResize::Stretch);
    onnx_matches_the_reference(&py, &image, &sam, rt);
    for (text, want) in [
        (r#"{"resize": "squash"}"#, "unknown variant `squash`"),
        (
            r#"{"resize": "stretch", "side": 1024}"#,
            "unknown field `side`",
        ),
        ("{", "EOF"),
    ] {
        std::fs::write(sam.join("sam.json"), text).unwrap();
        let e = lsplat_prep::onnx::load_sam(&sam, rt, &opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sam.json") && e.contains(want), "{e}");
    }
}

/// OpenCV's `cv2.resize(INTER_LINEAR)` on uint8 against ours: square crops of many
/// sizes to 224 (up, down, the exact 2× reduction that OpenCV turns into INTER_AREA,
/// the identity) and whole-image sizes.
#[test]
fn opencv_resize_matches_cv2() {
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (1, 1, 224, 224),
        (2, 3, 224, 224),
        (5, 5, 224, 224),
        (37, 37, 224, 224),
        (223, 223, 224, 224),
        (224, 224, 224, 224),
        (300, 300, 224, 224),
        (448, 448, 224, 224),
        (449, 449, 224, 224),
        (672, 672, 224, 224),
        (1000, 1000, 224, 224),
        (1264, 832, 632, 416),
        (504, 378, 1264, 832),
        (3958, 2968, 1440, 1080),
    ];
    let code = format!(
        "import cv2, numpy as np\nrng = np.random.default_rng(7)\nfor i, (w, h, ow, oh) in enumerate({cases:?}):\n    a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)\n    np.save(r'{0}/src_%d.npy' % i, a)\n    np.save(r'{0}/dst_%d.npy' % i, cv2.resize(a, (ow, oh)))\n",
        tmp.path().display()
    );
    let st = Command::new(&py).args(["-c", &code]).status().unwrap();
    assert!(st.success());
    for (i, &(w, h, ow, oh)) in cases.iter().enumerate() {
        let (_, src) = npy(tmp.path(), &format!("src_{i}.npy"));
        let (_, want) = npy(tmp.path(), &format!("dst_{i}.npy"));
        let im = Image8 {
            width: w,
            height: h,
            channels: 3,
            data: src.iter().map(|&v| v as u8).collect(),
        };
        let got = lsplat_prep::resize::cv::resize_linear(&im, ow, oh);
        let diff = got
            .data
            .iter()
            .zip(&want)
            .filter(|(a, b)| **a as f32 != **b)
            .count();
        assert_eq!(diff, 0, "{w}x{h} -> {ow}x{oh}: {diff} values differ");
    }
}
