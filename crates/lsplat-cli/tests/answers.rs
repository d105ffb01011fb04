//! From features to answers, end to end through the binary: `render` against the
//! float64 reference renderer, the autoencoder → V1 training → `query` chain checked
//! against the library's relevancy of the rendered, decoded features, `eval lerf`,
//! and bad input.

mod common;

use common::cli::*;
use common::python;
use std::process::Command;

use lsplat_core::config::DemoConfig;
use lsplat_data::npy::read_npy;
use lsplat_tests::reference;

const DEMO: [&str; 10] = [
    "--set",
    "demo.gaussians=600",
    "--set",
    "demo.cameras=3",
    "--set",
    "demo.width=40",
    "--set",
    "demo.height=30",
    "--set",
    "log.progress=false",
];

#[test]
fn render_matches_the_float64_reference() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let mut args = vec![
        "train",
        "--set",
        "train.iterations=30",
        "--set",
        "train.init_std=0.1",
    ];
    args.extend(DEMO);
    args.extend(["--out", s(&run_dir)]);
    ok(&args);
    let out = dir.path().join("render");
    let text = ok(&[
        "render",
        "--run",
        s(&run_dir),
        "--cameras",
        "demo_001",
        "--out",
        s(&out),
    ]);
    assert!(text.contains("rendered 1 cameras"), "{text}");
    assert!(out.join("demo_001.png").is_file());
    assert!(!out.join("demo_000.npy").exists(), "only the named camera");
    let img = read_npy(&out.join("demo_001.npy")).unwrap();
    assert_eq!(img.shape, vec![30, 40, 3]);
    // The reference: the demo regenerated, the run's features composited in f64.
    let demo = lsplat_data::demo::generate(
        &DemoConfig {
            gaussians: 600,
            cameras: 3,
            width: 40,
            height: 30,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    let cam = &demo.scene.cameras[1];
    let feats = read_npy(&run_dir.join("features.npy")).unwrap().data;
    let splats = reference::project(&demo.scene.gaussians, cam, 0.01, 1e10);
    let (mut checked, mut covered) = (0, 0);
    for y in 0..30u32 {
        for x in 0..40u32 {
            let r = reference::pixel(&splats, &feats, 3, x, y, 1e-4);
            if r.ambiguous {
                continue;
            }
            let p = (y * 40 + x) as usize;
            for c in 0..3 {
                let got = img.data[p * 3 + c] as f64;
                assert!(
                    (got - r.value[c]).abs() < 1e-4,
                    "pixel ({x}, {y}) channel {c}: {got} vs {}",
                    r.value[c]
                );
            }
            checked += 1;
            covered += (!r.weights.is_empty()) as usize;
        }
    }
    assert!(
        checked > 1100 && covered > 200,
        "{checked} checked, {covered} covered"
    );
}

#[test]
fn autoencoder_v1_training_and_queries() {
    let sy = synth_512();
    let r = &sy.root;
    let ae = r.join("ae.safetensors");
    let out = ok(&[
        "autoencoder",
        "train",
        "--dataset",
        s(&r.join("d512")),
        "--out",
        s(&ae),
        "--epochs",
        "8",
        "--quiet",
    ]);
    assert!(
        out.contains("rows/s") && out.contains("kept epoch"),
        "{out}"
    );
    ok(&[
        "autoencoder",
        "encode",
        "--model",
        s(&ae),
        "--dataset",
        s(&r.join("d512")),
        "--out",
        s(&r.join("d3")),
    ]);
    let (a, b) = (
        lsplat_data::dataset::read_feature_rows(&r.join("d512")).unwrap(),
        lsplat_data::dataset::read_feature_rows(&r.join("d3")).unwrap(),
    );
    assert_eq!((a.dim, b.dim, a.rows()), (512, 3, b.rows()));
    let model = lsplat_ae::load_model(&ae).unwrap().model;
    assert_eq!(
        b.values,
        model.encode(&a.values).unwrap(),
        "encode = the model's encoder"
    );
    // Train V1 on the codes, then query through the decoder.
    let run3 = r.join("run3");
    let scene = scene_with(r, "d3");
    ok(&[
        "train",
        "--scene",
        s(&scene),
        "--set",
        "train.iterations=60",
        "--set",
        "train.init_std=0.1",
        "--set",
        "log.progress=false",
        "--out",
        s(&run3),
    ]);
    let text = write_text(r, 512);
    let q = r.join("q");
    let said = ok(&[
        "query",
        "--run",
        s(&run3),
        "--text",
        s(&text),
        "--model",
        s(&ae),
        "--out",
        s(&q),
        "--cameras",
        "frame_00002",
    ]);
    assert!(said.contains("3 queries on 1 cameras"), "{said}");
    let rel = read_npy(&q.join("frame_00002/thing_1.npy")).unwrap();
    assert_eq!(rel.shape, vec![36, 48]);
    assert!(q.join("frame_00002/thing_1.png").is_file());
    // The same numbers from the library: render, decode, relevancy.
    let rd = r.join("render");
    ok(&[
        "render",
        "--run",
        s(&run3),
        "--cameras",
        "frame_00002",
        "--out",
        s(&rd),
    ]);
    let img = read_npy(&rd.join("frame_00002.npy")).unwrap();
    let dec = model.decode(&img.data, 1).unwrap();
    let t = lsplat_data::embeddings::read_embeddings(&text).unwrap();
    let pos = t.stack(&["thing 1"]).unwrap();
    let neg = t.stack(&lsplat_query::CANONICAL).unwrap();
    let want = lsplat_query::relevancy(&dec, 512, &pos, &neg).unwrap();
    for (g, w) in rel.data.iter().zip(&want) {
        assert!((g - w).abs() < 1e-5, "{g} vs {w}");
    }
    // The 3D protocol decodes each Gaussian's code through the autoencoder: its
    // selections are the library's on the decoded per-Gaussian features.
    let (objects, size) = known_objects(r);
    let labels = label(r, "frame_00003", size, &objects.join(","));
    let j3 = eval_lerf_3d(
        &run3,
        &labels,
        &text,
        &r.join("eval3"),
        &["--model", s(&ae)],
    );
    let codes = read_npy(&run3.join("features.npy")).unwrap().data;
    check_3d_selections(&j3, &model.decode(&codes, 1).unwrap(), 512, &text);
    // Bad input: a 3-channel run without a model; a model of another dimension;
    // embeddings of the wrong width; a missing canonical phrase.
    let e = fails(&[
        "query",
        "--run",
        s(&run3),
        "--text",
        s(&text),
        "--out",
        s(&r.join("x")),
    ]);
    assert!(e.contains("give --model"), "{e}");
    let e = fails(&[
        "autoencoder",
        "encode",
        "--model",
        s(&ae),
        "--dataset",
        s(&r.join("d3")),
        "--out",
        s(&r.join("x")),
    ]);
    assert!(
        e.contains("ae.safetensors") && e.contains("512-D") && e.contains("3-D"),
        "{e}"
    );
    let narrow = write_text(r, 256);
    let e = fails(&[
        "query",
        "--run",
        s(&run3),
        "--text",
        s(&narrow),
        "--model",
        s(&ae),
        "--out",
        s(&r.join("x")),
    ]);
    assert!(e.contains("text256.npy") && e.contains("256-D"), "{e}");
    std::fs::write(
        text.with_extension("txt"),
        "object\nthings\nstuff\nsurface\nthing 0\nthing 1\nthing 2",
    )
    .unwrap();
    let e = fails(&[
        "query",
        "--run",
        s(&run3),
        "--text",
        s(&text),
        "--model",
        s(&ae),
        "--out",
        s(&r.join("x")),
    ]);
    assert!(
        e.contains("text512.npy") && e.contains("\"texture\""),
        "{e}"
    );
    assert!(!r.join("x").exists(), "nothing written for bad input");
}

/// RGB8 pixels of a PNG file.
fn png_pixels(path: &std::path::Path) -> Vec<u8> {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    buf
}

/// Heat maps light only the subject (issue 29, point 17): a pixel whose rendered
/// opacity is under `query.min_alpha` (0.5) keeps the dimmed feature picture in the
/// PNG even where its raw relevancy is above 0.5, while the `.npy` keeps the raw map
/// and `alpha.npy` the opacity (checked against the render's composited ones).
#[test]
fn heat_maps_do_not_light_the_background() {
    let sy = synth_512();
    let r = &sy.root;
    let run = r.join("avg");
    ok(&[
        "solve",
        "--scene",
        s(&sy.scene),
        "--method",
        "average",
        "--set",
        "log.progress=false",
        "--out",
        s(&run),
    ]);
    let text = write_text(r, 512);
    let q = r.join("q");
    let said = ok(&[
        "query",
        "--run",
        s(&run),
        "--text",
        s(&text),
        "--out",
        s(&q),
    ]);
    assert!(said.contains("query.min_alpha"), "{said}");
    let (mut bg_raw_lit, mut bg, mut fg_lit) = (0, 0, 0);
    for cam in ["frame_00001", "frame_00002", "frame_00003", "frame_00004"] {
        let dir = q.join(cam);
        let alpha = read_npy(&dir.join("alpha.npy")).unwrap();
        assert_eq!(alpha.shape, vec![36, 48]);
        let feats = png_pixels(&dir.join("features.png"));
        for k in 0..3 {
            let map = read_npy(&dir.join(format!("thing_{k}.npy"))).unwrap().data;
            let heat = png_pixels(&dir.join(format!("thing_{k}.png")));
            for (p, (&m, &a)) in map.iter().zip(&alpha.data).enumerate() {
                let px = &heat[3 * p..3 * p + 3];
                let dim: Vec<u8> = feats[3 * p..3 * p + 3]
                    .iter()
                    .map(|v| (*v as f32 * 0.3).round() as u8)
                    .collect();
                if a < 0.5 {
                    bg += 1;
                    bg_raw_lit += usize::from(m > 0.5);
                    assert_eq!(px, &dim[..], "{cam} thing {k} pixel {p}: alpha {a}, r {m}");
                } else if m > 0.5 && px != &dim[..] {
                    fg_lit += 1;
                }
            }
        }
    }
    eprintln!("{bg} background pixel-queries, {bg_raw_lit} with raw r > 0.5; {fg_lit} lit");
    assert!(bg_raw_lit > 0, "the raw maps keep background relevancy");
    assert!(fg_lit > 0, "the subject is lit");
    // alpha.npy is the composite of ones, as the float64 reference renders it.
    let back = lsplat_data::run_dir::load_run(&run).unwrap();
    let cam = back.camera("frame_00002").unwrap();
    let alpha = read_npy(&q.join("frame_00002/alpha.npy")).unwrap().data;
    let splats = reference::project(&back.gaussians, cam, 0.01, 1e10);
    let ones = vec![1.0f32; back.gaussians.len()];
    let mut checked = 0;
    for y in 0..36u32 {
        for x in 0..48u32 {
            let rp = reference::pixel(&splats, &ones, 1, x, y, 1e-4);
            if !rp.ambiguous {
                let got = f64::from(alpha[(y * 48 + x) as usize]);
                assert!((got - rp.value[0]).abs() < 1e-4, "({x}, {y})");
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked}");
    // With --min-alpha 0 the background is lit again where its raw relevancy says so.
    let q0 = r.join("q0");
    ok(&[
        "query",
        "--run",
        s(&run),
        "--text",
        s(&text),
        "--out",
        s(&q0),
        "--min-alpha",
        "0",
    ]);
    let relit = ["frame_00001", "frame_00002", "frame_00003", "frame_00004"]
        .iter()
        .flat_map(|cam| (0..3).map(move |k| (cam, k)))
        .map(|(cam, k)| {
            let dir = q0.join(cam);
            let alpha = read_npy(&dir.join("alpha.npy")).unwrap().data;
            let map = read_npy(&dir.join(format!("thing_{k}.npy"))).unwrap().data;
            let (heat, feats) = (
                png_pixels(&dir.join(format!("thing_{k}.png"))),
                png_pixels(&dir.join("features.png")),
            );
            (0..map.len())
                .filter(|&p| alpha[p] < 0.5 && map[p] > 0.5)
                .filter(|&p| {
                    let dim = feats[3 * p..3 * p + 3]
                        .iter()
                        .map(|v| (*v as f32 * 0.3).round() as u8);
                    !heat[3 * p..3 * p + 3].iter().copied().eq(dim)
                })
                .count()
        })
        .sum::<usize>();
    assert_eq!(relit, bg_raw_lit, "min_alpha 0 lights every raw r > 0.5");
    let e = fails(&[
        "query",
        "--run",
        s(&run),
        "--text",
        s(&text),
        "--out",
        s(&r.join("x")),
        "--min-alpha",
        "1.5",
    ]);
    assert!(e.contains("--min-alpha 1.5"), "{e}");
}

/// A 512-D run evaluated on labels made from synth's own level-3 masks: each object's
/// mask is the ground truth of the query "thing k".
#[test]
fn eval_lerf_on_known_masks() {
    // 96×72: LangSplat's 30×30 smoothing box must be smaller than the image (synth's
    // orbit frames the subject, so objects fill much of it).
    let sy = synth_scene_sized(512, 3, 4, "d512", (96, 72));
    let r = &sy.root;
    let run = r.join("run512");
    let scene = scene_with(r, "d512");
    ok(&[
        "train",
        "--scene",
        s(&scene),
        "--set",
        "train.iterations=150",
        "--set",
        "train.init_std=0.1",
        "--set",
        "train.loss=cosine",
        "--set",
        "train.normalize=false",
        "--set",
        "log.progress=false",
        "--out",
        s(&run),
    ]);
    let text = write_text(r, 512);
    // Ground truth: frame_00003's objects (rows 0..3 are their features, "thing k").
    let (objects, (w, h)) = known_objects(r);
    let labels = label(r, "frame_00003", (w, h), &objects.join(","));
    let out = r.join("eval");
    let j = eval_lerf(&run, &labels, &text, &out, &[]);
    assert_eq!(j["pairs"], objects.len());
    let miou = j["miou"].as_f64().unwrap();
    let acc = j["localization_accuracy"].as_f64().unwrap();
    eprintln!("known-mask eval: mIoU {miou:.3}, accuracy {acc:.3}");
    assert!(miou > 0.2 && acc >= 0.5, "{j}");
    assert!(
        out.join("frame_00003/thing_0.png").is_file()
            || out.join("frame_00003/thing_1.png").is_file()
    );
    // The same run found as LangSplat's level run `MODEL_1` of `-m MODEL`.
    std::os::unix::fs::symlink(&run, r.join("model_1")).unwrap();
    let said = ok(&[
        "eval",
        "lerf",
        "-m",
        s(&r.join("model")),
        "--labels",
        s(&labels),
        "--text",
        s(&text),
        "--out",
        s(&r.join("eval_m")),
    ]);
    assert!(said.contains("mIoU"), "{said}");
    let jm: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.join("eval_m/lerf.json")).unwrap())
            .unwrap();
    assert_eq!(jm["miou"], j["miou"]);
    // LangSplat's index rule maps frame 3 to the third camera: the same answer.
    let out2 = r.join("eval2");
    let j2 = eval_lerf(&run, &labels, &text, &out2, &["--match", "index"]);
    assert_eq!(j2["miou"], j["miou"]);
    // A frame with no camera.
    label(r, "frame_00009", (w, h), &objects[0]);
    let e = fails(&[
        "eval",
        "lerf",
        "--run",
        s(&run),
        "--labels",
        s(&labels),
        "--text",
        s(&text),
        "--out",
        s(&r.join("x")),
    ]);
    assert!(
        e.contains("frame_00009.json") && e.contains("no camera"),
        "{e}"
    );
    assert!(!r.join("x").exists());
}

/// The embeddings layouts docs/formats.md shows, written by pyarrow/NumPy exactly as
/// documented (random vectors stand in for CLIP), read here; and a model file read by
/// the `safetensors` package.
#[test]
fn python_writes_embeddings_and_reads_models() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model =
        lsplat_ae::Autoencoder::new(512, &lsplat_ae::ENCODER_DIMS, &lsplat_ae::DECODER_DIMS, 3)
            .unwrap();
    let ae = d.join("ae.safetensors");
    std::fs::write(&ae, lsplat_ae::model_bytes(&model, &Default::default())).unwrap();
    let script = r#"
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq
from safetensors.numpy import load_file
d = sys.argv[1]
names = ["object", "things", "stuff", "texture", "bear nose"]
emb = np.random.default_rng(0).standard_normal((len(names), 512)).astype(np.float32)
pq.write_table(pa.table({"name": names, "embedding": pa.FixedSizeListArray.from_arrays(pa.array(emb.ravel()), 512)}), d + "/text.parquet")
np.save(d + "/text.npy", emb); open(d + "/text.txt", "w").write("\n".join(names))
import pandas as pd
pd.DataFrame({"name": pd.Series(names, dtype="string[pyarrow]"), "embedding": list(emb)}).to_parquet(d + "/text_pandas.parquet")
assert str(pq.read_schema(d + "/text_pandas.parquet").field("name").type) == "large_string"
pq.write_table(pa.table({"name": pa.array(names, pa.string_view()), "embedding": pa.FixedSizeListArray.from_arrays(pa.array(emb.ravel()), 512)}), d + "/text_view.parquet")
m = load_file(d + "/ae.safetensors")
print(m["encoder.0.weight"].shape, m["decoder.12.weight"].shape, float(m["encoder.0.weight"].astype(np.float64).sum()), int(m["encoder.1.num_batches_tracked"]))
"#;
    let o = Command::new(&py)
        .arg("-c")
        .arg(script)
        .arg(d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    let sum: f64 = model.enc_first.weight.iter().map(|v| *v as f64).sum();
    assert!(said.starts_with("(256, 512) (512, 256) "), "{said}");
    let py_sum: f64 = said.split_whitespace().nth(4).unwrap().parse().unwrap();
    assert!(
        (py_sum - sum).abs() < 1e-9 * sum.abs().max(1.0),
        "{py_sum} vs {sum}"
    );
    let a = lsplat_data::embeddings::read_embeddings(&d.join("text.parquet")).unwrap();
    let b = lsplat_data::embeddings::read_embeddings(&d.join("text.npy")).unwrap();
    assert_eq!(
        a.names,
        ["object", "things", "stuff", "texture", "bear nose"]
    );
    assert_eq!((a.dim, &a.names), (b.dim, &b.names));
    assert_eq!(a.values, b.values);
    // pandas writes the names as `large_string`, pyarrow's `string_view` as Utf8View:
    // both read the same (issue 29, point 7).
    for f in ["text_pandas.parquet", "text_view.parquet"] {
        let c = lsplat_data::embeddings::read_embeddings(&d.join(f)).unwrap();
        assert_eq!(
            (c.dim, &c.names, &c.values),
            (a.dim, &a.names, &a.values),
            "{f}"
        );
    }
}
