//! The evaluation protocols on hand-made scenes whose answers are known: the demo's
//! Gaussians split into two objects with known 3-D features (A = e₁, B = e₂, the rest
//! e₃) and 3-D "text embeddings" (a = e₁, b = e₂, the canonical phrases and c along
//! (1, 1, 1)/√3, z = −e₁). Ground truths come from the float64 reference renderer.
//! LERF's 3D protocol, 3D-OVS and per-Gaussian segmentation; their agreement where
//! they must agree; and malformed inputs.

mod common;

use std::path::{Path, PathBuf};

use common::cli::*;
use lsplat_core::config::DemoConfig;
use lsplat_core::{Camera, Gaussians};
use lsplat_data::io::write_npy_f32;
use lsplat_tests::reference;
use serde_json::Value;

const N: u32 = 600;
const W: u32 = 40;
const H: u32 = 30;

struct Scene {
    _dir: tempfile::TempDir,
    root: PathBuf,
    run: PathBuf,
    text: PathBuf,
    gaussians: Gaussians,
    cameras: Vec<Camera>,
    /// 0 = A, 1 = B, 2 = background, per Gaussian.
    object: Vec<usize>,
}

/// A demo run whose features are replaced by the objects' features.
fn scene() -> Scene {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let run = root.join("run");
    let n = format!("demo.gaussians={N}");
    let (w, h) = (format!("demo.width={W}"), format!("demo.height={H}"));
    ok(&[
        "train",
        "--set",
        &n,
        "--set",
        "demo.cameras=3",
        "--set",
        &w,
        "--set",
        &h,
        "--set",
        "train.iterations=2",
        "--set",
        "log.progress=false",
        "--out",
        s(&run),
    ]);
    let demo = lsplat_data::demo::generate(
        &DemoConfig {
            gaussians: N,
            cameras: 3,
            width: W,
            height: H,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    let g = demo.scene.gaussians;
    // Thirds by x: A left, background middle, B right.
    let mut xs: Vec<f32> = g.means.iter().map(|m| m[0]).collect();
    xs.sort_by(f32::total_cmp);
    let (lo, hi) = (xs[xs.len() / 3], xs[2 * xs.len() / 3]);
    let object: Vec<usize> = g
        .means
        .iter()
        .map(|m| {
            if m[0] < lo {
                0
            } else if m[0] >= hi {
                1
            } else {
                2
            }
        })
        .collect();
    let feats: Vec<f32> = object
        .iter()
        .flat_map(|&o| (0..3).map(move |j| f32::from(u8::from(j == o))))
        .collect();
    write_npy_f32(&run.join("features.npy"), &[g.len(), 3], &feats).unwrap();
    let c = 1.0 / 3f32.sqrt();
    let names = [
        "object", "things", "stuff", "texture", "thing a", "thing b", "thing c", "thing z",
    ];
    let mut values = vec![c; 4 * 3];
    values.extend([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, c, c, c, -1.0, 0.0, 0.0]);
    let text = root.join("text3.npy");
    write_npy_f32(&text, &[names.len(), 3], &values).unwrap();
    std::fs::write(text.with_extension("txt"), names.join("\n")).unwrap();
    Scene {
        _dir: dir,
        root,
        run,
        text,
        gaussians: g,
        cameras: demo.scene.cameras,
        object,
    }
}

impl Scene {
    fn members(&self, o: usize) -> Vec<usize> {
        (0..self.object.len())
            .filter(|&i| self.object[i] == o)
            .collect()
    }

    /// The float64 reference's accumulated opacity of object `o` rendered alone, and
    /// whether a Gaussian at the renderer's opacity cut-off makes it uncertain.
    fn alpha(&self, o: usize, cam: usize) -> Vec<(f64, bool)> {
        let idx = self.members(o);
        let pick = |v: &Vec<[f32; 3]>| idx.iter().map(|&i| v[i]).collect();
        let g = Gaussians {
            means: pick(&self.gaussians.means),
            log_scales: pick(&self.gaussians.log_scales),
            rotations: idx.iter().map(|&i| self.gaussians.rotations[i]).collect(),
            opacity_logits: idx
                .iter()
                .map(|&i| self.gaussians.opacity_logits[i])
                .collect(),
        };
        let splats = reference::project(&g, &self.cameras[cam], 0.01, 1e10);
        let ones = vec![1.0; idx.len()];
        (0..W * H)
            .map(|p| {
                let r = reference::pixel(&splats, &ones, 1, p % W, p / W, 1e-4);
                (r.value[0], r.ambiguous)
            })
            .collect()
    }

    /// The float64 reference's composited features `[W·H][3]` of the whole scene, with
    /// the uncertainty flag as a fourth value (1: a Gaussian at the cut-off).
    fn features(&self, cam: usize) -> Vec<Vec<f64>> {
        let splats = reference::project(&self.gaussians, &self.cameras[cam], 0.01, 1e10);
        let f: Vec<f32> = self
            .object
            .iter()
            .flat_map(|&o| (0..3).map(move |j| f32::from(u8::from(j == o))))
            .collect();
        (0..W * H)
            .map(|p| {
                let r = reference::pixel(&splats, &f, 3, p % W, p / W, 1e-4);
                let mut v = r.value;
                v.push(f64::from(u8::from(r.ambiguous)));
                v
            })
            .collect()
    }
}

/// A threshold in (0.5, 0.9) as far as possible from every reference opacity (and
/// 0.005 from uncertain ones, which a Gaussian at the cut-off may move by 1/255).
fn clear_threshold(alphas: &[&Vec<(f64, bool)>]) -> f64 {
    let all: Vec<(f64, bool)> = alphas.iter().flat_map(|a| a.iter().copied()).collect();
    let clearance = |t: f64| {
        all.iter()
            .map(|&(a, amb)| (a - t).abs() - if amb { 0.005 } else { 0.0 })
            .fold(f64::INFINITY, f64::min)
    };
    let (t, c) = (0..=4000)
        .map(|k| 0.5 + 0.4 * f64::from(k) / 4000.0)
        .map(|t| (t, clearance(t)))
        .fold(
            (0.7, f64::NEG_INFINITY),
            |a, b| if b.1 > a.1 { b } else { a },
        );
    assert!(c > 1e-4, "no clear threshold (clearance {c})");
    t
}

/// A mask as LERF label objects: one rectangle per run of set pixels in a row.
fn mask_objects(category: &str, mask: &[bool]) -> Vec<String> {
    let mut out = Vec::new();
    for y in 0..H as usize {
        let mut x = 0;
        while x < W as usize {
            if !mask[y * W as usize + x] {
                x += 1;
                continue;
            }
            let x0 = x;
            while x < W as usize && mask[y * W as usize + x] {
                x += 1;
            }
            let x1 = x - 1;
            out.push(format!(
                r#"{{"category": "{category}", "bbox": [{x0}, {y}, {x1}, {y}], "segmentation": [[{x0}, {y}], [{x1}, {y}], [{x1}, {y}], [{x0}, {y}]]}}"#
            ));
        }
    }
    assert!(!out.is_empty(), "{category}: an empty mask");
    out
}

fn write_label(dir: &Path, frame: &str, objects: &[String]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join(format!("{frame}.json")),
        format!(
            r#"{{"info": {{"width": {W}, "height": {H}, "name": "{frame}.jpg"}}, "objects": [{}]}}"#,
            objects.join(", ")
        ),
    )
    .unwrap();
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn eval(sc: &Scene, labels: &Path, out: &str, extra: &[&str]) -> (String, PathBuf) {
    let out = sc.root.join(out);
    let mut args = vec![
        "eval",
        "lerf",
        "--run",
        s(&sc.run),
        "--labels",
        s(labels),
        "--text",
        s(&sc.text),
        "--out",
        s(&out),
    ];
    args.extend(extra);
    (ok(&args), out)
}

/// LERF's 3D protocol: object A and object B are each selected exactly (IoU 1 against
/// the reference's opacity of the object alone), a query relevant to every Gaussian
/// alike selects nothing (IoU 0), a category absent from a frame is not scored
/// there; ties in the level choice go to the first level; `all` prints both
/// protocols and equals each run alone; a 1-neighbour smoothing changes nothing.
#[test]
fn lerf_3d_protocol_known_answers() {
    let sc = scene();
    let (a1, b1, a2) = (sc.alpha(0, 1), sc.alpha(1, 1), sc.alpha(0, 2));
    let t = clear_threshold(&[&a1, &b1, &a2]);
    let m = |a: &Vec<(f64, bool)>| a.iter().map(|v| v.0 > t).collect::<Vec<bool>>();
    let labels = sc.root.join("labels");
    let mut f1 = mask_objects("thing a", &m(&a1));
    f1.extend(mask_objects("thing b", &m(&b1)));
    f1.push(r#"{"category": "thing c", "bbox": [2, 2, 9, 9], "segmentation": [[2, 2], [9, 2], [9, 9], [2, 9]]}"#.into());
    write_label(&labels, "demo_001", &f1);
    write_label(&labels, "demo_002", &mask_objects("thing a", &m(&a2)));
    let ts = format!("{t}");
    let (said, out) = eval(
        &sc,
        &labels,
        "e3",
        &["--protocol", "3d", "--alpha-threshold", &ts],
    );
    assert!(
        said.contains("mIoU 0.7500, mAcc@0.25 0.7500 (3/4)"),
        "{said}"
    );
    let j = read_json(&out.join("lerf_3d.json"));
    assert!(!out.join("lerf.json").exists(), "3D only");
    let q = j["per_query"].as_array().unwrap();
    let row = |f: &str, c: &str| {
        q.iter()
            .find(|r| r["frame"] == f && r["query"] == c)
            .unwrap()
    };
    let (na, nb) = (sc.members(0).len(), sc.members(1).len());
    assert_eq!(q.len(), 4, "thing b and c are not labelled in demo_002");
    for (f, c, iou, sel) in [
        ("demo_001", "thing a", 1.0, na),
        ("demo_001", "thing b", 1.0, nb),
        ("demo_001", "thing c", 0.0, 0),
        ("demo_002", "thing a", 1.0, na),
    ] {
        let r = row(f, c);
        assert_eq!(
            (r["iou"].as_f64(), r["selected"].as_u64()),
            (Some(iou), Some(sel as u64)),
            "{r}"
        );
    }
    assert_eq!(j["per_category"][2]["category"], "thing c");
    assert_eq!(j["per_category"][0]["pairs"], 2);
    assert_eq!(
        (j["acc_25"].as_f64(), j["clipped_shapes"].as_u64()),
        (Some(0.75), Some(0))
    );
    assert!(out.join("3d/demo_001/thing_a.png").is_file());
    // Two identical level runs: the first level is chosen; the same answers.
    let (_, out2) = eval(
        &sc,
        &labels,
        "e3b",
        &[
            "--protocol",
            "3d",
            "--alpha-threshold",
            &ts,
            "--run",
            s(&sc.run),
            "--knn",
            "1",
        ],
    );
    let j2 = read_json(&out2.join("lerf_3d.json"));
    assert_eq!(j2["miou"], j["miou"]);
    let r = &j2["per_query"][0];
    assert_eq!(r["level_scores"][0], r["level_scores"][1]);
    assert_eq!(r["selected"], na);
    // `all`: the 2D protocol beside the 3D one, each as when run alone.
    let (said, out3) = eval(
        &sc,
        &labels,
        "eall",
        &["--protocol", "all", "--alpha-threshold", &ts],
    );
    let (_, out2d) = eval(&sc, &labels, "e2d", &[]);
    assert!(
        said.contains("2D") && said.contains("3D") && said.contains("per category (mIoU)"),
        "{said}"
    );
    assert_eq!(
        read_json(&out3.join("lerf_3d.json"))["per_query"],
        j["per_query"]
    );
    let (x, y) = (
        read_json(&out3.join("lerf.json")),
        read_json(&out2d.join("lerf.json")),
    );
    assert_eq!(
        (x["miou"].clone(), x["per_query"].clone()),
        (y["miou"].clone(), y["per_query"].clone())
    );
    assert!(
        x["protocol"]
            .as_str()
            .unwrap()
            .starts_with("LangSplat LERF-OVS")
    );
    // 3D options without the 3D protocol, and values out of range.
    for (args, want) in [
        (vec!["--knn", "3"], "apply to the 3D protocol"),
        (
            vec!["--protocol", "3d", "--alpha-threshold", "1"],
            "--alpha-threshold 1: must be in [0, 1)",
        ),
        (
            vec!["--protocol", "3d", "--select-threshold=-0.1"],
            "must be in [0, 1)",
        ),
        (
            vec!["--protocol", "3d", "--knn", "100000"],
            "--knn 100000: at most",
        ),
    ] {
        let mut a = vec![
            "eval",
            "lerf",
            "--run",
            s(&sc.run),
            "--labels",
            s(&labels),
            "--text",
            s(&sc.text),
            "--out",
            "x",
        ];
        a.extend(args);
        let e = fails(&a);
        assert!(e.contains(want), "{e}");
    }
}

fn argv(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A 0/255 PNG of a mask.
fn mask_png(path: &Path, mask: &[bool]) {
    let rgb: Vec<u8> = mask
        .iter()
        .flat_map(|&m| [if m { 255 } else { 0 }; 3])
        .collect();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, lsplat_query::picture::png_rgb(W, H, &rgb).unwrap()).unwrap();
}

/// 3D-OVS: with masks drawn from the reference (a where the composited weight of A
/// is at least B's, b elsewhere, z nowhere), every pixel's arg-max is right: IoU 1
/// for a and b, 0 for the absent z (3D-OVS's rule) unless `--skip-absent`, and an
/// accuracy of 1. With `--negatives` the background goes to the canonical phrases, as computed
/// from the reference. Views without cameras and categories without embeddings are
/// errors naming the file.
#[test]
fn ovs_protocol_known_answers() {
    let sc = scene();
    let seg = sc.root.join("bed/segmentations");
    std::fs::create_dir_all(&seg).unwrap();
    std::fs::write(seg.join("classes.txt"), "thing z\nthing b\nthing a\n").unwrap();
    let c = 1.0 / 3f64.sqrt();
    let (mut near, mut want_neg) = (0, Vec::new());
    for view in [1usize, 2] {
        let f = sc.features(view);
        let a: Vec<bool> = f.iter().map(|v| v[0] >= v[1]).collect();
        // Decisions closer than float32 noise (relative: each channel sums its own
        // object's weights), or than a cut-off Gaussian's 1/255.
        let close = |x: f64, y: f64, amb: bool| {
            x != y && (x - y).abs() < if amb { 5e-3 } else { 1e-4 * x.max(y) }
        };
        near += f
            .iter()
            .filter(|v| {
                let amb = v[3] > 0.0;
                close(v[0], v[1], amb) || close(c * (v[0] + v[1] + v[2]), v[0].max(v[1]), amb)
            })
            .count();
        let dir = seg.join(format!("{view:02}"));
        mask_png(&dir.join("thing a.png"), &a);
        mask_png(
            &dir.join("thing b.png"),
            &a.iter().map(|m| !m).collect::<Vec<_>>(),
        );
        mask_png(&dir.join("thing z.png"), &vec![false; (W * H) as usize]);
        // --negatives: a pixel goes to the canonical phrase when (Σ w)/√3 beats the
        // largest class weight (cosines scaled by the pixel's norm).
        let label: Vec<i32> = f
            .iter()
            .map(|v| {
                let best: usize = if v[0] >= v[1] { 0 } else { 1 };
                if c * (v[0] + v[1] + v[2]) > v[best].max(0.0) {
                    -1
                } else {
                    best as i32
                }
            })
            .collect();
        let iou = |k: i32, truth: &dyn Fn(usize) -> bool| {
            let i = (0..label.len())
                .filter(|&p| label[p] == k && truth(p))
                .count();
            let u = (0..label.len())
                .filter(|&p| label[p] == k || truth(p))
                .count();
            i as f64 / u as f64
        };
        want_neg.push((iou(0, &|p| a[p]), iou(1, &|p| !a[p])));
    }
    assert_eq!(near, 0, "a near tie would make the answer uncertain");
    let run = |out: &str, extra: &[&str]| {
        let o = sc.root.join(out);
        let bed = sc.root.join("bed");
        let mut a = vec![
            "eval",
            "3dovs",
            "--run",
            s(&sc.run),
            "--labels",
            s(&bed),
            "--text",
            s(&sc.text),
            "--out",
            s(&o),
        ];
        a.extend(extra);
        let said = ok(&a);
        (said, read_json(&o.join("3dovs.json")), o)
    };
    let (said, j, out) = run("ovs", &[]);
    assert!(
        said.contains("2 views, 3 classes, 6 (view, class) pairs"),
        "{said}"
    );
    assert_eq!(
        j["classes"],
        serde_json::json!(["thing a", "thing b", "thing z"])
    );
    assert!(
        (j["miou"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-12,
        "{j}"
    );
    assert_eq!(j["accuracy"], 1.0);
    assert_eq!(j["per_view"][0]["camera"], "demo_001");
    assert_eq!(j["per_view"][1]["ious"]["thing b"], 1.0);
    assert_eq!(j["per_view"][0]["absent"], serde_json::json!(["thing z"]));
    assert!(out.join("01.png").is_file() && out.join("02.png").is_file());
    let (_, j, _) = run("ovs2", &["--skip-absent"]);
    assert_eq!(
        (j["miou"].as_f64(), j["pairs"].as_u64()),
        (Some(1.0), Some(4))
    );
    let (_, j, _) = run("ovs3", &["--negatives"]);
    for (v, (a, b)) in want_neg.iter().enumerate() {
        let ious = &j["per_view"][v]["ious"];
        assert!(
            (ious["thing a"].as_f64().unwrap() - a).abs() < 1e-12,
            "{ious} vs {a}"
        );
        assert!(
            (ious["thing b"].as_f64().unwrap() - b).abs() < 1e-12,
            "{ious} vs {b}"
        );
    }
    assert!(want_neg[0].0 < 1.0, "the background left class a");
    // A view with no camera; a class without an embedding.
    let base = [
        "eval",
        "3dovs",
        "--run",
        s(&sc.run),
        "--text",
        s(&sc.text),
        "--out",
        "x",
    ];
    std::fs::create_dir_all(seg.join("07")).unwrap();
    for c in ["thing a", "thing b", "thing z"] {
        mask_png(
            &seg.join(format!("07/{c}.png")),
            &vec![true; (W * H) as usize],
        );
    }
    let mut a = base.to_vec();
    a.extend(["--labels", s(&seg)]);
    let e = fails(&a);
    assert!(e.contains("segmentations/07: view 7 has no camera"), "{e}");
    std::fs::remove_dir_all(seg.join("07")).unwrap();
    std::fs::write(seg.join("classes.txt"), "thing a\nthing q\n").unwrap();
    let e = fails(&a);
    assert!(e.contains("segmentations/01/thing q.png: missing"), "{e}");
    for v in ["01", "02"] {
        mask_png(
            &seg.join(format!("{v}/thing q.png")),
            &vec![false; (W * H) as usize],
        );
    }
    let e = fails(&a);
    assert!(e.contains("text3.npy") && e.contains("\"thing q\""), "{e}");
    assert!(!Path::new("x").exists());
}

/// Per-Gaussian segmentation: a point cloud at the Gaussians' centres labelled by
/// object (A → 7, B → 3, the rest 0) is matched exactly (mIoU, mAcc, accuracy 1), and
/// agrees with the 3D protocol's selection; shifted points within the radius give the
/// same answer, points out of reach are an error.
#[test]
fn gaussian_segmentation_known_answers() {
    let sc = scene();
    let write_points = |name: &str, shift: f32| {
        let mut t = format!(
            "ply\nformat ascii 1.0\nelement vertex {}\nproperty float x\nproperty float y\nproperty float z\nproperty ushort label\nend_header\n",
            sc.gaussians.len()
        );
        for (m, &o) in sc.gaussians.means.iter().zip(&sc.object) {
            let l = [7, 3, 0][o];
            t.push_str(&format!("{} {} {} {l}\n", m[0] + shift, m[1], m[2]));
        }
        let p = sc.root.join(name);
        std::fs::write(&p, t).unwrap();
        p
    };
    let classes = sc.root.join("classes.txt");
    std::fs::write(&classes, "# id name\n7 thing a\n3 thing b\n").unwrap();
    let run = |points: &Path, radius: &str, out: &str| -> Vec<String> {
        vec![
            "eval".into(),
            "gaussians".into(),
            "--run".into(),
            s(&sc.run).into(),
            "--points".into(),
            s(points).into(),
            "--classes".into(),
            s(&classes).into(),
            "--radius".into(),
            radius.into(),
            "--text".into(),
            s(&sc.text).into(),
            "--out".into(),
            s(&sc.root.join(out)).into(),
        ]
    };
    let exact = write_points("exact.ply", 0.0);
    let said = ok(&argv(&run(&exact, "1e-6", "g1")));
    assert!(
        said.contains("mIoU 1.0000, mAcc 1.0000, accuracy 1.0000"),
        "{said}"
    );
    let j = read_json(&sc.root.join("g1/gaussians.json"));
    let opaque = |o: usize| {
        sc.members(o)
            .iter()
            .filter(|&&i| 1.0 / (1.0 + (-sc.gaussians.opacity_logits[i]).exp()) >= 0.1)
            .count() as u64
    };
    assert_eq!(j["scored"].as_u64(), Some(opaque(0) + opaque(1)), "{j}");
    assert_eq!(j["per_class"][0]["both"].as_u64(), Some(opaque(0)));
    assert_eq!(j["per_class"][1]["class"], "thing b");
    // The 3D protocol selects the same Gaussians for "thing a" (all of A).
    let labels = sc.root.join("labels");
    write_label(&labels, "demo_001", &[r#"{"category": "thing a", "bbox": [0, 0, 5, 5], "segmentation": [[0, 0], [5, 0], [5, 5]]}"#.into()]);
    let (_, out) = eval(&sc, &labels, "e3", &["--protocol", "3d"]);
    let q = &read_json(&out.join("lerf_3d.json"))["per_query"][0];
    assert_eq!(q["selected"].as_u64(), Some(sc.members(0).len() as u64));
    // Points shifted by 1e-3 along x, radius 1e-2: the same; radius 1e-4: none.
    let shifted = write_points("shifted.ply", 1e-3);
    ok(&argv(&run(&shifted, "0.01", "g2")));
    let j2 = read_json(&sc.root.join("g2/gaussians.json"));
    assert_eq!(
        (j2["miou"].clone(), j2["scored"].clone()),
        (j["miou"].clone(), j["scored"].clone())
    );
    let e = fails(&argv(&run(&shifted, "1e-4", "g3")));
    assert!(e.contains("nothing to score"), "{e}");
    for (r, want) in [
        ("0", "--radius 0: must be a positive distance"),
        ("nan", "must be a positive"),
    ] {
        let e = fails(&argv(&run(&exact, r, "g4")));
        assert!(e.contains(want), "{e}");
    }
    let mut v = run(&exact, "0.1", "g5");
    v.extend(["--label-property".into(), "semantic".into()]);
    let e = fails(&argv(&v));
    assert!(
        e.contains("exact.ply") && e.contains("no vertex property `semantic`"),
        "{e}"
    );
    std::fs::write(&classes, "7 thing a\n7 thing b\n").unwrap();
    let e = fails(&argv(&run(&exact, "0.1", "g6")));
    assert!(e.contains("classes.txt: line 2: label listed twice"), "{e}");
    assert!(!sc.root.join("g4").exists() && !sc.root.join("g6").exists());
}

/// Issue 29, point 8, through the binary: malformed label folders are errors naming
/// the file and the shape, before anything is written; partly outside shapes are
/// clipped and counted in the report.
#[test]
fn malformed_label_folders() {
    let sc = scene();
    let good = r#"{"category": "thing a", "bbox": [0, 0, 5, 5], "segmentation": [[0, 0], [5, 0], [5, 5]]}"#;
    let case = |name: &str, files: &[(&str, String)]| -> String {
        let dir = sc.root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for (f, objects) in files {
            let (frame, image) = f.split_once(':').unwrap_or((*f, *f));
            std::fs::write(
                dir.join(format!("{frame}.json")),
                format!(r#"{{"info": {{"width": {W}, "height": {H}, "name": "{image}.jpg"}}, "objects": [{objects}]}}"#),
            )
            .unwrap();
        }
        let out = sc.root.join(format!("{name}_out"));
        let e = fails(&[
            "eval",
            "lerf",
            "--run",
            s(&sc.run),
            "--labels",
            s(&dir),
            "--text",
            s(&sc.text),
            "--out",
            s(&out),
        ]);
        assert!(!out.exists(), "{name}: nothing written");
        e
    };
    let e = case(
        "outside",
        &[(
            "demo_001",
            format!(
                r#"{good}, {{"category": "thing b", "bbox": [1, 1, 2, 2], "segmentation": [[50, 1], [60, 1], [60, 9]]}}"#
            ),
        )],
    );
    assert!(e.contains("demo_001.json: object 1 (`thing b`): `segmentation` lies entirely outside the 40x30 image"), "{e}");
    let e = case("box_out", &[("demo_001", r#"{"category": "thing a", "bbox": [41, 0, 45, 5], "segmentation": [[0, 0], [5, 0], [5, 5]]}"#.into())]);
    assert!(
        e.contains("`bbox` [41.0, 0.0, 45.0, 5.0] lies entirely outside"),
        "{e}"
    );
    let e = case("inverted", &[("demo_001", r#"{"category": "thing a", "bbox": [5, 0, 0, 5], "segmentation": [[0, 0], [5, 0], [5, 5]]}"#.into())]);
    assert!(e.contains("object 0 (`thing a`): inverted `bbox`"), "{e}");
    let e = case("empty", &[("demo_001", String::new())]);
    assert!(e.contains("demo_001.json: no objects"), "{e}");
    let e = case(
        "twice",
        &[("demo_001", good.into()), ("zz:demo_001", good.into())],
    );
    assert!(e.contains("zz.json: names frame `demo_001`"), "{e}");
    let e = case("no_files", &[]);
    assert!(e.contains("no label files"), "{e}");
    let e = case("no_embedding", &[("demo_001", r#"{"category": "thing q", "bbox": [0, 0, 5, 5], "segmentation": [[0, 0], [5, 0], [5, 5]]}"#.into())]);
    assert!(
        e.contains("text3.npy") && e.contains("no embedding for \"thing q\""),
        "{e}"
    );
    // Partly outside: scored, clipped, counted.
    let dir = sc.root.join("clipped");
    write_label(&dir, "demo_001", &[r#"{"category": "thing a", "bbox": [-3, 0, 5, 5], "segmentation": [[-3, 0], [5, 0], [5, 5]]}"#.into()]);
    let (said, out) = eval(&sc, &dir, "clipped_out", &[]);
    assert!(
        said.contains("warning: 1 label object(s) extend beyond their image"),
        "{said}"
    );
    assert_eq!(read_json(&out.join("lerf.json"))["clipped_shapes"], 1);
}
