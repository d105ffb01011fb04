//! `preprocess` → dataset → `solve` → `query` end to end through ONNX Runtime, with
//! the synthetic SAM graphs (scripts/sam_onnx.py) and a tiny random CLIP
//! (scripts/clip_onnx.py): no weights exist here.
//!
//! The repository has no trained splat for fern or snowmiku, so the geometry is
//! `synth`'s (the biker splat with orbit cameras) and the images are fern's photos
//! resized to the cameras' size and named after them: the chain's plumbing and
//! outputs are checked (files, shapes, resume, answers that are finite), not quality.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::python;
use lsplat_data::io::write_npy_f32;
use lsplat_data::npy::read_npy;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lsplat-engine"))
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn script(py: &str, name: &str, args: &[&std::ffi::OsStr]) {
    let s = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name);
    let o = Command::new(py).arg(s).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn ort_library(py: &str) -> PathBuf {
    let out = Command::new(py)
        .args(["-c", "import glob, os, onnxruntime; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', 'libonnxruntime.so*')))[-1])"])
        .output()
        .unwrap();
    assert!(out.status.success(), "onnxruntime is not installed in {py}");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn preprocess_then_solve_then_query() {
    let Some(py) = python() else { return };
    let (Some(ply), Some(fern)) = (
        lsplat_data::testdata::test_file("splats/playcanvas_biker.inria_sh0.ply"),
        lsplat_data::testdata::test_file("fern_llff/images_8"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (sam, clip) = (d.join("sam"), d.join("clip"));
    script(
        &py,
        "sam_onnx.py",
        &[sam.as_os_str(), "--side".as_ref(), "256".as_ref()],
    );
    script(&py, "clip_onnx.py", &["make".as_ref(), clip.as_os_str()]);
    let (w, h) = (96usize, 72usize);
    run(bin()
        .args([
            "synth", "--orbit", "3", "--width", "96", "--height", "72", "--splats",
        ])
        .arg(&ply)
        .arg("--out")
        .arg(d.join("synth")));
    std::fs::remove_dir_all(d.join("synth/language_features")).unwrap();
    // One photo per camera, resized to the camera's size, named after it.
    let cams: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("synth/cameras.json")).unwrap())
            .unwrap();
    let names: Vec<String> = cams
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["img_name"].as_str().unwrap().to_string())
        .collect();
    let images = d.join("images");
    std::fs::create_dir(&images).unwrap();
    for (i, n) in names.iter().enumerate() {
        let src = lsplat_prep::image::read_rgb(&fern.join(format!("image{i:03}.png"))).unwrap();
        let im = lsplat_prep::resize::cv::resize_linear(&src, w, h);
        let mut bytes = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut bytes, w as u32, h as u32);
            enc.set_color(png::ColorType::Rgb);
            enc.write_header()
                .unwrap()
                .write_image_data(&im.data)
                .unwrap();
        }
        std::fs::write(images.join(format!("{n}.png")), bytes).unwrap();
    }
    let lib = ort_library(&py);
    let pre = |extra: &[&str]| {
        let mut c = bin();
        c.arg("preprocess")
            .arg("--images")
            .arg(&images)
            .arg("--sam")
            .arg(d.join("sam"))
            .arg("--clip")
            .arg(d.join("clip"))
            .arg("--out")
            .arg(d.join("synth"))
            .args(["--set", "preprocess.points_per_side=6", "--set"])
            .arg(format!("onnx.runtime={}", lib.display()))
            .args(extra);
        c
    };
    let said = run(&mut pre(&[
        "--dataset",
        d.join("synth/dataset").to_str().unwrap(),
    ]));
    assert!(
        said.contains("preprocessed 3 images (3 this run)"),
        "{said}"
    );
    assert!(said.contains("seconds per image: encoder"), "{said}");
    let lf = d.join("synth/language_features");
    for n in &names {
        let img = lsplat_data::langsplat::read_image(&lf, n).unwrap();
        assert_eq!((img.width, img.height, img.dim), (w as u32, h as u32, 24));
        assert!(img.rows() > 0, "{n} has masks");
    }
    assert!(d.join("synth/dataset/features.parquet").is_file());
    // Everything is done: a second run processes nothing.
    let again = run(&mut pre(&[]));
    assert!(again.contains("(0 this run)"), "{again}");
    // Solve level 1 on the preprocessed dataset, then ask a query.
    let run_dir = d.join("run");
    run(bin()
        .args(["solve", "--method", "average", "--scene"])
        .arg(d.join("synth/scene.toml"))
        .arg("--out")
        .arg(&run_dir));
    let table = read_npy(&lf.join(format!("{}_f.npy", names[0]))).unwrap();
    let mut rng = lsplat_core::Rng::new(3);
    let mut text: Vec<f32> = (0..4 * 24).map(|_| rng.normal()).collect();
    text.extend_from_slice(&table.data[..24]);
    let t = d.join("text.npy");
    write_npy_f32(&t, &[5, 24], &text).unwrap();
    std::fs::write(
        t.with_extension("txt"),
        "object\nthings\nstuff\ntexture\nfirst mask",
    )
    .unwrap();
    let q = d.join("q");
    run(bin()
        .args(["query", "--run"])
        .arg(&run_dir)
        .arg("--text")
        .arg(&t)
        .arg("--out")
        .arg(&q)
        .args(["--cameras", &names[0]]));
    let rel = read_npy(&q.join(&names[0]).join("first_mask.npy")).unwrap();
    assert_eq!(rel.shape, vec![h, w]);
    assert!(
        rel.data
            .iter()
            .all(|v| v.is_finite() && (0.0..=1.0).contains(v))
    );
    // -s: a scene folder's images/ in, its language_features/ out.
    let scene = d.join("scene");
    std::fs::create_dir_all(scene.join("images")).unwrap();
    std::fs::copy(
        images.join(format!("{}.png", names[0])),
        scene.join("images/a.png"),
    )
    .unwrap();
    let said = run(bin()
        .arg("preprocess")
        .arg("-s")
        .arg(&scene)
        .arg("--sam")
        .arg(d.join("sam"))
        .arg("--clip")
        .arg(d.join("clip"))
        .args(["--set", "preprocess.points_per_side=4", "--set"])
        .arg(format!("onnx.runtime={}", lib.display())));
    assert!(said.contains("preprocessed 1 images"), "{said}");
    assert!(scene.join("language_features/a_f.npy").is_file());
    // A CLIP folder with only its image encoder (no vocabulary, no text.onnx) gives
    // the same features; the opt-in int8 encoder (scripts/quantize_clip.py) close ones.
    let image_only = d.join("clip_image_only");
    std::fs::create_dir(&image_only).unwrap();
    std::fs::copy(d.join("clip/image.onnx"), image_only.join("image.onnx")).unwrap();
    script(&py, "quantize_clip.py", &[image_only.as_os_str()]);
    // `preprocess -s` of a copy of the scene's image with the given folders: its
    // features and segmentation maps.
    let preprocessed = |tag: &str, sam: &Path, clip: &Path, extra: &[&str]| {
        let scene2 = d.join(format!("scene_{tag}"));
        std::fs::create_dir_all(scene2.join("images")).unwrap();
        std::fs::copy(scene.join("images/a.png"), scene2.join("images/a.png")).unwrap();
        run(bin()
            .arg("preprocess")
            .arg("-s")
            .arg(&scene2)
            .arg("--sam")
            .arg(sam)
            .arg("--clip")
            .arg(clip)
            .args(["--set", "preprocess.points_per_side=4", "--set"])
            .arg(format!("onnx.runtime={}", lib.display()))
            .args(extra));
        let lf = scene2.join("language_features");
        (
            read_npy(&lf.join("a_f.npy")).unwrap(),
            read_npy(&lf.join("a_s.npy")).unwrap(),
        )
    };
    let sam = d.join("sam");
    let (fp32, _) = preprocessed("fp32", &sam, &image_only, &[]);
    let want = read_npy(&scene.join("language_features/a_f.npy")).unwrap();
    assert_eq!(fp32.data, want.data, "features without the vocabulary");
    let extra = ["--set", "preprocess.clip_image_file=image.int8.onnx"];
    let (int8, _) = preprocessed("int8", &sam, &image_only, &extra);
    assert_eq!(int8.shape, fp32.shape);
    assert_ne!(int8.data, fp32.data, "the int8 encoder was not used");
    for (a, b) in int8.data.chunks(24).zip(fp32.data.chunks(24)) {
        let cos: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        assert!(cos > 0.98, "int8 feature cosine {cos}");
    }
    // Half-precision copies (scripts/half_onnx.py) still meet the contracts: a float16
    // CLIP gives the same masks and features within rounding; a float16 SAM runs (the
    // synthetic decoder's hash of the point is not smooth, so its masks are not
    // compared).
    let clip16 = d.join("clip16");
    let sam16 = d.join("sam16");
    script(
        &py,
        "half_onnx.py",
        &[image_only.as_os_str(), clip16.as_os_str()],
    );
    // The SAM copy takes the path of models over 1 GiB: shapes inferred from the file,
    // weights written beside the graph.
    let o = Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/half_onnx.py"))
        .arg(&sam)
        .arg(&sam16)
        .env("HALF_ONNX_EXTERNAL_ABOVE", "0")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(sam16.join("decoder.onnx.data").is_file());
    let seg32 = read_npy(&scene.join("language_features/a_s.npy")).unwrap();
    let (f16, s16) = preprocessed("clip16", &sam, &clip16, &[]);
    assert_eq!(s16.data, seg32.data, "a float16 CLIP changed the masks");
    assert_ne!(f16.data, fp32.data, "the float16 encoder was not used");
    for (a, b) in f16.data.chunks(24).zip(fp32.data.chunks(24)) {
        let cos: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        assert!(cos > 0.999, "float16 feature cosine {cos}");
    }
    let (f16, s16) = preprocessed("both16", &sam16, &clip16, &[]);
    assert_eq!(s16.shape, seg32.shape);
    assert!(
        s16.data.iter().any(|&v| v >= 0.0),
        "a float16 SAM found no mask"
    );
    assert_eq!(f16.shape[1], 24);
    // An EfficientSAM folder (`sam.json` declares its stretch): the same graphs give
    // other masks, since the crop is stretched instead of padded (its arithmetic is
    // checked against the reference in lsplat-prep's parity tests).
    let esam = d.join("esam");
    script(
        &py,
        "sam_onnx.py",
        &[
            esam.as_os_str(),
            "--side".as_ref(),
            "256".as_ref(),
            "--resize".as_ref(),
            "stretch".as_ref(),
        ],
    );
    let (fe, se) = preprocessed("esam", &esam, &image_only, &[]);
    assert_eq!(se.shape, seg32.shape);
    assert!(
        se.data.iter().any(|&v| v >= 0.0),
        "EfficientSAM found no mask"
    );
    assert_ne!(se.data, seg32.data, "the stretch was not used");
    assert_eq!(fe.shape[1], 24);
    let o = bin()
        .arg("preprocess")
        .arg("-s")
        .arg(&scene)
        .arg("--sam")
        .arg(d.join("sam"))
        .arg("--clip")
        .arg(&image_only)
        .args([
            "--set",
            "preprocess.clip_image_file=image.fp16.onnx",
            "--set",
        ])
        .arg(format!("onnx.runtime={}", lib.display()))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && e.contains("image.fp16.onnx")
            && e.contains("no such CLIP image encoder"),
        "{e}"
    );
    // Bad input: a truncated image is named and stops the run.
    let bytes = std::fs::read(images.join(format!("{}.png", names[1]))).unwrap();
    std::fs::write(images.join("zz.png"), &bytes[..bytes.len() / 3]).unwrap();
    let o = pre(&[]).output().unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("zz.png"), "{e}");
}
