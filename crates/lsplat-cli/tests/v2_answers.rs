//! A LangSplatV2 run answers like any other: `render` composites its code weights,
//! `query` scores them through the run's codebook (checked against decoding every
//! rendered pixel to 512-D with the library), `eval lerf` finds known objects, and
//! bad input is refused.

mod common;

use common::cli::*;

use lsplat_data::npy::read_npy;
use lsplat_tests::reference;

#[test]
fn langsplat_v2_runs_render_query_and_eval() {
    // 10 cameras: k-means needs at least 64 mask features for the 64 codes.
    // 96×72: LangSplatV2's 29×29 smoothing box must be smaller than the image
    // (synth's orbit frames the subject, so objects fill much of it).
    let sy = synth_scene_sized(512, 3, 10, "d512", (96, 72));
    let r = &sy.root;
    let (run, scene) = (r.join("v2"), &sy.scene);
    ok(&[
        "train",
        "--scene",
        s(scene),
        "--set",
        "train.model=langsplat_v2",
        "--set",
        "train.iterations=150",
        "--set",
        "log.progress=false",
        "--out",
        s(&run),
    ]);
    // render: the composited 64 code weights per pixel.
    let rd = r.join("render");
    ok(&[
        "render",
        "--run",
        s(&run),
        "--cameras",
        "frame_00002",
        "--out",
        s(&rd),
    ]);
    let img = read_npy(&rd.join("frame_00002.npy")).unwrap();
    assert_eq!(img.shape, vec![72, 96, 64]);
    assert!(rd.join("frame_00002.png").is_file());
    // The reference: each Gaussian's dense weights from codes.parquet composited in
    // float64 (the run read back as the CLI reads it, with the plugin's reader).
    let back =
        lsplat_data::run_dir::load_run_with(&run, &|d, _| langsplat_v2::outputs::read_run(d))
            .unwrap();
    let cam = back.camera("frame_00002").unwrap();
    let splats = reference::project(&back.gaussians, cam, 0.01, 1e10);
    let (mut checked, mut covered) = (0, 0);
    // Every other pixel of every other row (the 48×36 of the former test's images).
    for y in (0..72u32).step_by(2) {
        for x in (0..96u32).step_by(2) {
            let r = reference::pixel(&splats, &back.features, 64, x, y, 1e-4);
            if r.ambiguous {
                continue;
            }
            let p = (y * 96 + x) as usize;
            for c in 0..64 {
                let got = f64::from(img.data[p * 64 + c]);
                assert!((got - r.value[c]).abs() < 1e-4, "pixel ({x}, {y}) code {c}");
            }
            checked += 1;
            covered += usize::from(!r.weights.is_empty());
        }
    }
    assert!(
        checked > 1000 && covered > 100,
        "{checked} checked, {covered} covered"
    );
    // query: the library's relevancy of every rendered pixel decoded through the
    // codebook, Bᵀw, to 512-D.
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
        "--cameras",
        "frame_00002",
    ]);
    assert!(
        said.contains("3 queries on 1 cameras") && said.contains("codebook.parquet"),
        "{said}"
    );
    let (book, dim) =
        lsplat_data::tables::read_row_table(&run.join("codebook.parquet"), "code", "feature")
            .unwrap();
    assert_eq!((book.len(), dim), (64 * 512, 512));
    let mut dec: Vec<f32> = img
        .data
        .chunks_exact(64)
        .flat_map(|w| {
            let book = &book;
            (0..512).map(move |j| {
                w.iter()
                    .enumerate()
                    .map(|(c, &x)| f64::from(x) * f64::from(book[c * 512 + j]))
                    .sum::<f64>() as f32
            })
        })
        .collect();
    lsplat_query::normalize_rows(&mut dec, 512);
    let t = lsplat_data::embeddings::read_embeddings(&text).unwrap();
    let neg = t.stack(&lsplat_query::CANONICAL).unwrap();
    for k in 0..3 {
        let pos = t.stack(&[format!("thing {k}").as_str()]).unwrap();
        let want = lsplat_query::relevancy(&dec, 512, &pos, &neg).unwrap();
        let got = read_npy(&q.join(format!("frame_00002/thing_{k}.npy"))).unwrap();
        assert_eq!(got.shape, vec![72, 96]);
        let worst = got
            .data
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "thing {k}: relevancy differs by {worst}");
    }
    // eval lerf on frame 3's known objects (as the V1 test builds them).
    let (objects, size) = known_objects(r);
    let labels = label(r, "frame_00003", size, &objects.join(","));
    let out = r.join("eval");
    let j = eval_lerf(&run, &labels, &text, &out, &[]);
    let (miou, acc) = (
        j["miou"].as_f64().unwrap(),
        j["localization_accuracy"].as_f64().unwrap(),
    );
    eprintln!("V2 known-mask eval: mIoU {miou:.3}, accuracy {acc:.3}");
    assert!(miou > 0.2 && acc >= 0.5, "{j}");
    assert_eq!(
        j["protocol"], "LangSplatV2 LERF-OVS (eval_lerf.py)",
        "a V2 run's default"
    );
    // LangSplat's protocol on request: another smoothing, so other maps.
    let out1 = r.join("eval1");
    let j1 = eval_lerf(&run, &labels, &text, &out1, &["--protocol", "langsplat"]);
    assert_eq!(
        j1["protocol"],
        "LangSplat LERF-OVS (eval/evaluate_iou_loc.py)"
    );
    eprintln!(
        "V2 run, LangSplat's protocol: mIoU {:.3}, accuracy {:.3}",
        j1["miou"].as_f64().unwrap(),
        j1["localization_accuracy"].as_f64().unwrap()
    );
    // The 3D protocol decodes each Gaussian's code weights through the codebook:
    // its selections are the library's on Bᵀw decoded here in float64.
    let j3 = eval_lerf_3d(&run, &labels, &text, &r.join("eval3"), &[]);
    let mut per_gaussian: Vec<f32> = back
        .features
        .chunks_exact(64)
        .flat_map(|w| {
            let book = &book;
            (0..512).map(move |j| {
                w.iter()
                    .enumerate()
                    .map(|(c, &x)| f64::from(x) * f64::from(book[c * 512 + j]))
                    .sum::<f64>() as f32
            })
        })
        .collect();
    lsplat_query::normalize_rows(&mut per_gaussian, 512);
    check_3d_selections(&j3, &per_gaussian, 512, &text);
    // Bad input: an autoencoder for a V2 run; embeddings narrower than the codebook;
    // a garbled codes file.
    let ae = r.join("ae.safetensors");
    std::fs::write(&ae, b"not used").unwrap();
    let bad = [
        "query",
        "--run",
        s(&run),
        "--text",
        s(&text),
        "--out",
        "x",
        "--model",
        s(&ae),
    ];
    let e = fails(&bad);
    assert!(
        e.contains("codebook.parquet") && e.contains("--model"),
        "{e}"
    );
    let narrow = write_text(r, 256);
    let e = fails(&[
        "query",
        "--run",
        s(&run),
        "--text",
        s(&narrow),
        "--out",
        "x",
    ]);
    assert!(e.contains("text256.npy") && e.contains("512-D"), "{e}");
    let codes = run.join("codes.parquet");
    let len = std::fs::metadata(&codes).unwrap().len();
    let bytes = std::fs::read(&codes).unwrap();
    std::fs::write(&codes, &bytes[..len as usize / 2]).unwrap();
    let e = fails(&["render", "--run", s(&run), "--out", s(&r.join("x"))]);
    assert!(e.contains("codes.parquet") && e.contains("Parquet"), "{e}");
    assert!(!r.join("x").exists(), "nothing written for bad input");
}
