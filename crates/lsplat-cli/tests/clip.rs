//! Typed queries through the binary: `embed` with a CLIP model (ONNX, made by
//! scripts/clip_onnx.py with random weights), `query --clip` and `eval lerf --clip`
//! giving exactly the answers of the same phrases through `--text`, the run's
//! embedding cache, the warnings and errors, and `info`'s ONNX Runtime line.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::cli::*;

/// ORT_DYLIB_PATH, or the library of LSPLAT_PYTHON's onnxruntime; None (SKIPPED) when
/// neither, unless LSPLAT_REQUIRE_ORT=1.
fn ort_library(py: Option<&str>) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let found = py.and_then(|py| {
        let out = Command::new(py)
            .args(["-c", "import glob, os, onnxruntime; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', 'libonnxruntime.so*')))[-1])"])
            .output()
            .ok()?;
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !s.is_empty()).then(|| PathBuf::from(s))
    });
    if found.is_none() {
        assert!(
            std::env::var("LSPLAT_REQUIRE_ORT").as_deref() != Ok("1"),
            "LSPLAT_REQUIRE_ORT=1 but no ONNX Runtime (ORT_DYLIB_PATH, or LSPLAT_PYTHON with onnxruntime)"
        );
        eprintln!(
            "SKIPPED (typed queries): no ONNX Runtime (set ORT_DYLIB_PATH or LSPLAT_PYTHON with onnxruntime)"
        );
    }
    found
}

/// A tiny CLIP model folder (24-D embeddings).
fn make_clip(py: &str, out: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/clip_onnx.py");
    let o = Command::new(py)
        .arg(script)
        .args(["make", s(out)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Runs the binary with the ONNX Runtime library in ORT_DYLIB_PATH.
fn engine(lib: &Path, args: &[&str]) -> std::process::Output {
    let o = bin()
        .env("ORT_DYLIB_PATH", lib)
        .args(args)
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn ok_with(lib: &Path, args: &[&str]) -> (String, String) {
    let o = engine(lib, args);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "{args:?}: {err}");
    (out, err)
}

fn fails_with(lib: &Path, args: &[&str]) -> String {
    let o = engine(lib, args);
    assert!(!o.status.success(), "{args:?} should fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn typed_queries_equal_the_same_phrases_from_a_file() {
    let Some(py) = common::python() else { return };
    let Some(lib) = ort_library(Some(&py)) else {
        return;
    };
    let sy = synth_scene(24, 3, 3, "d24");
    let r = &sy.root;
    let clip = r.join("clip");
    make_clip(&py, &clip);

    let (said, _) = ok_with(&lib, &["info"]);
    assert!(
        said.contains("ONNX Runtime 1.") && said.contains("CPUExecutionProvider"),
        "{said}"
    );

    // embed: the canonical phrases first, unit rows.
    let q = r.join("q.parquet");
    let (said, _) = ok_with(
        &lib,
        &[
            "embed",
            "--clip",
            s(&clip),
            "--text",
            "thing 0",
            "--text",
            "thing 1",
            "--text",
            "thing 2",
            "--text",
            "object",
            "--out",
            s(&q),
        ],
    );
    assert!(
        said.contains("encoded 7 phrases") && said.contains("7 phrases, 24-D"),
        "{said}"
    );
    let e = lsplat_data::embeddings::read_embeddings(&q).unwrap();
    assert_eq!(
        e.names,
        [
            "object", "things", "stuff", "texture", "thing 0", "thing 1", "thing 2"
        ]
    );
    assert_eq!(e.dim, 24);

    let run = r.join("run");
    let scene = scene_with(r, "d24");
    ok(&[
        "train",
        "--scene",
        s(&scene),
        "--set",
        "train.iterations=20",
        "--set",
        "train.init_std=0.1",
        "--set",
        "train.normalize=false",
        "--set",
        "log.progress=false",
        "--out",
        s(&run),
    ]);

    // query --clip encodes the phrases itself: the maps of the same phrases from the
    // file (to float rounding: the file's rows are normalised again when read).
    let (a, b) = (r.join("qa"), r.join("qb"));
    let (said, _) = ok_with(
        &lib,
        &[
            "query",
            "--run",
            s(&run),
            "--clip",
            s(&clip),
            "--query",
            "thing 0,thing 2",
            "--out",
            s(&a),
        ],
    );
    assert!(
        said.contains("CLIP: encoded 6 phrases (0 cached)"),
        "{said}"
    );
    ok_with(
        &lib,
        &[
            "query",
            "--run",
            s(&run),
            "--text",
            s(&q),
            "--query",
            "thing 0,thing 2",
            "--out",
            s(&b),
        ],
    );
    for cam in ["frame_00001", "frame_00003"] {
        for f in ["thing_0.npy", "thing_2.npy"] {
            let x = lsplat_data::npy::read_npy(&a.join(cam).join(f)).unwrap();
            let y = lsplat_data::npy::read_npy(&b.join(cam).join(f)).unwrap();
            assert_eq!(x.shape, y.shape);
            let d = x
                .data
                .iter()
                .zip(&y.data)
                .map(|(p, q)| (p - q).abs())
                .fold(0f32, f32::max);
            assert!(d <= 1e-5, "{cam}/{f} differs by {d}");
        }
    }
    // The phrases are cached in the run: nothing is encoded the second time.
    let cache: Vec<PathBuf> = std::fs::read_dir(run.join("clip_text"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(cache.len(), 1, "{cache:?}");
    let cached = lsplat_data::embeddings::read_embeddings(&cache[0]).unwrap();
    assert_eq!(cached.names.len(), 6);
    let (said, _) = ok_with(
        &lib,
        &[
            "query",
            "--run",
            s(&run),
            "--clip",
            s(&clip),
            "--query",
            "thing 2",
            "--out",
            s(&r.join("qc")),
        ],
    );
    assert!(!said.contains("CLIP: encoded"), "{said}");
    let (said, _) = ok_with(
        &lib,
        &[
            "query",
            "--run",
            s(&run),
            "--clip",
            s(&clip),
            "--query",
            "thing 1",
            "--out",
            s(&r.join("qd")),
        ],
    );
    assert!(said.contains("encoded 1 phrases (4 cached)"), "{said}");

    // view --clip embeds whatever is typed; a file knows only its own phrases.
    let (said, err) = ok_with(
        &lib,
        &[
            "view",
            "--run",
            s(&run),
            "--clip",
            s(&clip),
            "--bench",
            "32x24",
            "--repeats",
            "1",
            "--bench-query",
            "a red mug on the sofa",
        ],
    );
    assert!(err.contains("free text") && err.contains("24-D"), "{err}");
    assert!(
        said.contains("relevancy") && said.contains("segmentation"),
        "{said}"
    );
    let e = fails_with(
        &lib,
        &[
            "view",
            "--run",
            s(&run),
            "--text",
            s(&q),
            "--bench",
            "32x24",
            "--bench-query",
            "a red mug on the sofa",
        ],
    );
    assert!(
        e.contains("no embedding for \"a red mug on the sofa\""),
        "{e}"
    );

    // eval lerf --clip: the labels' categories encoded the same way.
    let (objects, (w, h)) = known_objects(r);
    let labels = label(r, "frame_00003", (w, h), &objects.join(","));
    let (ea, eb) = (r.join("ea"), r.join("eb"));
    ok_with(
        &lib,
        &[
            "eval",
            "lerf",
            "--run",
            s(&run),
            "--labels",
            s(&labels),
            "--clip",
            s(&clip),
            "--out",
            s(&ea),
        ],
    );
    ok_with(
        &lib,
        &[
            "eval",
            "lerf",
            "--run",
            s(&run),
            "--labels",
            s(&labels),
            "--text",
            s(&q),
            "--out",
            s(&eb),
        ],
    );
    let json = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p.join("lerf.json")).unwrap()).unwrap()
    };
    let (ja, jb) = (json(&ea), json(&eb));
    let (pa, pb) = (
        ja["per_query"].as_array().unwrap(),
        jb["per_query"].as_array().unwrap(),
    );
    assert_eq!(pa.len(), 3);
    for (x, y) in pa.iter().zip(pb) {
        assert_eq!((&x["query"], &x["hit"]), (&y["query"], &y["hit"]));
        let d = (x["iou"].as_f64().unwrap() - y["iou"].as_f64().unwrap()).abs();
        assert!(d < 1e-3, "{x} vs {y}");
    }

    // A phrase longer than CLIP's 77 tokens is cut with a warning; an empty one fails.
    let long = "a small red apple on a wooden table ".repeat(12);
    let (_, err) = ok_with(
        &lib,
        &[
            "query",
            "--run",
            s(&run),
            "--clip",
            s(&clip),
            "--query",
            &long,
            "--cameras",
            "frame_00001",
            "--out",
            s(&r.join("qe")),
        ],
    );
    assert!(err.contains("cut to fit"), "{err}");
    let e = fails_with(
        &lib,
        &[
            "query",
            "--run",
            s(&run),
            "--clip",
            s(&clip),
            "--query",
            " \t",
            "--out",
            s(&r.join("qf")),
        ],
    );
    assert!(e.contains("empty"), "{e}");
    let e = fails_with(
        &lib,
        &[
            "query",
            "--run",
            s(&run),
            "--query",
            "mug",
            "--out",
            s(&r.join("qg")),
        ],
    );
    assert!(e.contains("--text FILE") && e.contains("--clip DIR"), "{e}");
    let e = fails_with(
        &lib,
        &[
            "embed",
            "--clip",
            s(&r.join("nope")),
            "--text",
            "mug",
            "--out",
            s(&r.join("x.parquet")),
        ],
    );
    assert!(
        e.contains("nope") && e.contains("no such CLIP model folder"),
        "{e}"
    );
    assert!(!r.join("x.parquet").exists());
    // A missing runtime: the error says what to install.
    let o = bin()
        .env("ORT_DYLIB_PATH", r.join("none.so"))
        .args([
            "embed",
            "--clip",
            s(&clip),
            "--text",
            "mug",
            "--out",
            s(&r.join("y.parquet")),
        ])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("none.so") && e.contains("pip install onnxruntime"),
        "{e}"
    );
}
