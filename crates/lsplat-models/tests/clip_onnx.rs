//! CLIP's encoders through ONNX Runtime against a float64 NumPy reference of the same
//! math (scripts/clip_onnx.py builds open_clip-architecture graphs with seeded random
//! weights and computes the reference from the weights it reads back), and the errors
//! on bad model folders.

mod common;

use std::path::{Path, PathBuf};

use lsplat_models::clip::{ClipImage, ClipModel, ClipText};
use lsplat_models::preprocess::{RgbImage, clip_pixels};
use lsplat_models::{Accelerator, ModelError, SessionOptions, runtime};

struct Setup {
    py: String,
    dir: tempfile::TempDir,
    rt: &'static lsplat_models::Runtime,
}

fn setup(what: &str) -> Option<Setup> {
    let lib = common::ort_library(what)?;
    let py = common::python(what)?;
    let rt = runtime::load(Some(&lib)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    make(&py, &dir.path().join("clip"), &[], what)?;
    Some(Setup { py, dir, rt })
}

fn make(py: &str, out: &Path, extra: &[&str], what: &str) -> Option<()> {
    let mut args = vec!["make", out.to_str().unwrap()];
    args.extend(extra);
    common::run_script(py, "../../scripts/clip_onnx.py", &args, what)
}

fn opts() -> SessionOptions {
    SessionOptions {
        threads: 2,
        ..Default::default()
    }
}

fn unit(v: &[f64]) -> Vec<f64> {
    let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.iter().map(|x| x / n).collect()
}

#[test]
fn encoders_match_the_numpy_reference() {
    let Some(s) = setup("CLIP encoders vs NumPy") else {
        return;
    };
    let clip = ClipModel::at(&s.dir.path().join("clip"), None).unwrap();
    let mut text = ClipText::load(&clip, s.rt, &opts()).unwrap();
    text.batch = 2; // three runs: 2 + 2 + 1
    let long = "a photo of a red apple on a wooden table ".repeat(12);
    let phrases = [
        "object",
        "red apple",
        "Mug!",
        "ｃａｆé &amp; teddy 🐻",
        long.as_str(),
    ];
    let mut seen = Vec::new();
    let (dim, emb) = text
        .encode(&phrases, &mut |d, n| seen.push((d, n)))
        .unwrap();
    assert_eq!(dim, 24);
    assert_eq!(seen, [(0, 5), (2, 5), (4, 5), (5, 5)]);
    let ids: Vec<i64> = phrases
        .iter()
        .flat_map(|p| text.tokenizer().tokenize(p).unwrap().ids)
        .collect();
    assert!(text.tokenizer().tokenize(&long).unwrap().truncated());

    let mut image = ClipImage::load(&clip, s.rt, &opts()).unwrap();
    image.batch = 2;
    let mut imgs = vec![
        RgbImage::new(
            300,
            240,
            (0..300 * 240 * 3).map(|i| (i * 7 % 251) as u8).collect(),
        )
        .unwrap(),
        RgbImage::new(224, 224, vec![90; 224 * 224 * 3]).unwrap(),
    ];
    if let Some(data) = lsplat_data::testdata::test_data() {
        imgs.push(RgbImage::open(&data.join("fern_llff/images_8/image000.png")).unwrap());
    }
    let (idim, iemb) = image.encode_images(&imgs, &mut |_, _| {}).unwrap();
    assert_eq!(idim, 24);
    let pixels: Vec<f32> = imgs.iter().flat_map(clip_pixels).collect();
    // Whole images and preprocessed crops give the same embeddings.
    let (_, again) = image.encode_pixels(&pixels, &mut |_, _| {}).unwrap();
    assert_eq!(iemb, again);

    let d = s.dir.path();
    let bytes = |v: Vec<[u8; 8]>| v.concat();
    std::fs::write(
        d.join("ids.i64"),
        bytes(ids.iter().map(|x| x.to_le_bytes()).collect()),
    )
    .unwrap();
    std::fs::write(
        d.join("pixels.f32"),
        pixels
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let json = d.join("ref.json");
    let args = [
        "reference".to_string(),
        d.join("clip").to_str().unwrap().to_string(),
        "--ids".into(),
        d.join("ids.i64").to_str().unwrap().to_string(),
        "--pixels".into(),
        d.join("pixels.f32").to_str().unwrap().to_string(),
        "--json".into(),
        json.to_str().unwrap().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    common::run_script(&s.py, "../../scripts/clip_onnx.py", &args, "reference").unwrap();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for (key, got, rows) in [("text", &emb, phrases.len()), ("image", &iemb, imgs.len())] {
        let want = r[key].as_array().unwrap();
        assert_eq!(want.len(), rows);
        for (i, w) in want.iter().enumerate() {
            let w: Vec<f64> = w
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let w = unit(&w);
            let g = &got[i * 24..(i + 1) * 24];
            let n = g.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
            assert!((n - 1.0).abs() < 1e-6, "{key} {i}: length {n}");
            let worst = g
                .iter()
                .zip(&w)
                .map(|(a, b)| (*a as f64 - b).abs())
                .fold(0.0, f64::max);
            assert!(worst <= 1e-4, "{key} {i}: differs by {worst}");
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

fn text_err(dir: &Path, rt: &'static lsplat_models::Runtime) -> String {
    let clip = ClipModel::at(dir, None).unwrap();
    ClipText::load(&clip, rt, &opts()).unwrap_err().to_string()
}

fn image_err(dir: &Path, rt: &'static lsplat_models::Runtime) -> String {
    let clip = ClipModel::at(dir, None).unwrap();
    ClipImage::load(&clip, rt, &opts()).unwrap_err().to_string()
}

#[test]
fn bad_model_folders_are_errors_naming_the_file() {
    let Some(s) = setup("CLIP model errors") else {
        return;
    };
    let good = s.dir.path().join("clip");
    let d = s.dir.path();

    let missing = d.join("missing");
    copy_dir(&good, &missing);
    std::fs::remove_file(missing.join("image.onnx")).unwrap();
    let e = image_err(&missing, s.rt);
    assert!(
        e.contains("missing/image.onnx") && e.contains("no such file"),
        "{e}"
    );

    let corrupt = d.join("corrupt");
    copy_dir(&good, &corrupt);
    let bytes = std::fs::read(corrupt.join("text.onnx")).unwrap();
    std::fs::write(corrupt.join("text.onnx"), &bytes[..bytes.len() / 3]).unwrap();
    let e = text_err(&corrupt, s.rt);
    assert!(
        e.contains("corrupt/text.onnx") && e.contains("not a readable ONNX model"),
        "{e}"
    );

    let renamed = d.join("renamed");
    make(
        &s.py,
        &renamed,
        &["--text-input", "tokens", "--image-dtype", "float16"],
        "",
    )
    .unwrap();
    let e = text_err(&renamed, s.rt);
    assert!(
        e.contains("renamed/text.onnx")
            && e.contains("`tokens`")
            && e.contains("`input_ids`: int64 [B, 77]"),
        "{e}"
    );
    let e = image_err(&renamed, s.rt);
    assert!(
        e.contains("renamed/image.onnx") && e.contains("must be `pixel_values`: float32"),
        "{e}"
    );

    let short = d.join("short");
    make(
        &s.py,
        &short,
        &["--context", "64", "--image-input", "image"],
        "",
    )
    .unwrap();
    let e = text_err(&short, s.rt);
    assert!(
        e.contains("short/text.onnx") && e.contains("[?, 64]") && e.contains("[B, 77]"),
        "{e}"
    );
    let e = image_err(&short, s.rt);
    assert!(
        e.contains("short/image.onnx") && e.contains("`image`"),
        "{e}"
    );

    let vocab = d.join("vocab");
    copy_dir(&good, &vocab);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, b"#version: 0.2\nhello world\nfoo bar\n").unwrap();
    std::fs::write(
        vocab.join("bpe_simple_vocab_16e6.txt.gz"),
        gz.finish().unwrap(),
    )
    .unwrap();
    let e = text_err(&vocab, s.rt);
    assert!(
        e.contains("vocab/bpe_simple_vocab_16e6.txt.gz") && e.contains("not CLIP's vocabulary"),
        "{e}"
    );
    std::fs::write(vocab.join("bpe_simple_vocab_16e6.txt.gz"), b"plain text").unwrap();
    let e = text_err(&vocab, s.rt);
    assert!(e.contains("not CLIP's vocabulary"), "{e}");

    // A folder without the vocabulary: an error naming it, or the file given apart
    // (`models.clip_vocab`, `--vocab`).
    let novocab = d.join("novocab");
    copy_dir(&good, &novocab);
    std::fs::remove_file(novocab.join("bpe_simple_vocab_16e6.txt.gz")).unwrap();
    let e = text_err(&novocab, s.rt);
    assert!(
        e.contains("novocab/bpe_simple_vocab_16e6.txt.gz") && e.contains("no such file"),
        "{e}"
    );
    let apart = ClipModel::at(&novocab, Some(&good.join("bpe_simple_vocab_16e6.txt.gz"))).unwrap();
    ClipText::load(&apart, s.rt, &opts()).unwrap();

    let clip = ClipModel::at(&good, None).unwrap();
    let mut text = ClipText::load(&clip, s.rt, &opts()).unwrap();
    let e = text.encode(&["  \u{3000}\t"], &mut |_, _| {}).unwrap_err();
    assert!(
        matches!(e, ModelError::Query(_)) && e.to_string().contains("empty"),
        "{e}"
    );
    let e = ClipModel::at(&d.join("nope"), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nope") && e.contains("no such CLIP model folder"),
        "{e}"
    );
}

#[test]
fn a_missing_accelerator_falls_back_to_the_cpu() {
    let Some(s) = setup("execution provider fall-back") else {
        return;
    };
    let clip = ClipModel::at(&s.dir.path().join("clip"), None).unwrap();
    for acc in [Accelerator::Cuda, Accelerator::Amd, Accelerator::Auto] {
        let opts = SessionOptions {
            accelerator: acc,
            ordinal: 0,
            threads: 1,
        };
        let mut text = ClipText::load(&clip, s.rt, &opts).unwrap();
        let wanted = match acc {
            Accelerator::Cuda => "CUDAExecutionProvider",
            _ => "ROCMExecutionProvider",
        };
        // On a runtime with the provider and a device, it is used; otherwise the CPU.
        let p = text.model().provider().to_string();
        if s.rt.has_provider(wanted) && p != "CPUExecutionProvider" {
            eprintln!("{acc:?} runs on {p}");
        } else {
            assert_eq!(p, "CPUExecutionProvider", "{acc:?}");
        }
        let (d, _) = text.encode(&["mug"], &mut |_, _| {}).unwrap();
        assert_eq!(d, 24);
    }
    assert_eq!(
        Accelerator::from_backend(lsplat_core::config::BackendKind::Simt),
        Accelerator::Cpu
    );
    assert_eq!(
        Accelerator::from_backend(lsplat_core::config::BackendKind::Hip),
        Accelerator::Amd
    );
}

#[test]
fn a_second_runtime_library_is_refused() {
    let Some(s) = setup("ONNX Runtime reload") else {
        return;
    };
    assert!(std::ptr::eq(runtime::load(Some(&s.rt.path)).unwrap(), s.rt));
    let copy: PathBuf = s.dir.path().join("libonnxruntime.so.copy");
    std::fs::copy(&s.rt.path, &copy).unwrap();
    let e = runtime::load(Some(&copy)).unwrap_err().to_string();
    assert!(
        e.contains("libonnxruntime.so.copy") && e.contains("already loaded"),
        "{e}"
    );
    assert!(
        s.rt.has_provider("CPUExecutionProvider"),
        "{:?}",
        s.rt.providers
    );
    assert!(s.rt.version.starts_with("1."), "{}", s.rt.version);
}
