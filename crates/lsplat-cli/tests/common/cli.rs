//! Running the binary in tests, and the small synth scenes the answer tests share.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lsplat_core::config::DemoConfig;
use lsplat_data::io::write_npy_f32;
use lsplat_data::npy::read_npy;

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lsplat-engine"))
}

pub fn run(args: &[&str]) -> Output {
    let o = bin().args(args).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

pub fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The error of a command that must fail.
pub fn fails(args: &[&str]) -> String {
    let o = run(args);
    assert!(!o.status.success(), "{args:?} should fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A tiny splat (the demo's 1500 Gaussians) with a synth dataset beside it; `scene`
/// is the scene file that trains on it.
pub struct Synth {
    pub _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub scene: PathBuf,
}

/// The 512-D synth scene of the answer tests: 3 objects, 4 cameras, imported to `d512`.
pub fn synth_512() -> Synth {
    synth_scene(512, 3, 4, "d512")
}

/// A synth dataset of `dim`-D features with `objects` level-3 objects (4× as many
/// masks at level 1, the level trained) over `cameras` orbit cameras of 48×36,
/// imported to `<root>/<dataset>`.
pub fn synth_scene(dim: usize, objects: usize, cameras: u32, dataset: &str) -> Synth {
    synth_scene_sized(dim, objects, cameras, dataset, (48, 36))
}

/// [`synth_scene`] with images of `width × height`.
pub fn synth_scene_sized(
    dim: usize,
    objects: usize,
    cameras: u32,
    dataset: &str,
    (width, height): (u32, u32),
) -> Synth {
    let dir = tempfile::tempdir().unwrap();
    // synth owns its output folder: the splat lies beside it.
    let root = dir.path().join("scene");
    let demo = lsplat_data::demo::generate(
        &DemoConfig {
            gaussians: 1500,
            objects: 3,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    let n = demo.scene.gaussians.len();
    let ply = lsplat_data::ply::SplatPly {
        gaussians: demo.scene.gaussians,
        sh_degree: 0,
        sh_dc: vec![[0.0; 3]; n],
        sh_rest: Vec::new(),
        extra_names: Vec::new(),
        extra: Vec::new(),
    };
    let splat = dir.path().join("tiny.ply");
    lsplat_data::ply::write_ply(&splat, &ply).unwrap();
    let (dim, objects, cameras) = (dim.to_string(), objects.to_string(), cameras.to_string());
    let (width, height) = (width.to_string(), height.to_string());
    ok(&[
        "synth",
        "--splats",
        s(&splat),
        "--orbit",
        &cameras,
        "--width",
        &width,
        "--height",
        &height,
        "--up",
        "z",
        "--objects",
        &objects,
        "--dim",
        &dim,
        "--out",
        s(&root),
    ]);
    ok(&[
        "import",
        "langsplat",
        "--source",
        s(&root.join("language_features")),
        "--out",
        s(&root.join(dataset)),
    ]);
    // synth's scene.toml names `dataset` beside it.
    let scene = if dataset == "dataset" {
        root.join("scene.toml")
    } else {
        scene_with(&root, dataset)
    };
    Synth {
        _dir: dir,
        root,
        scene,
    }
}

/// Text embeddings: the canonical phrases (random unit vectors) and one query per
/// level-3 object (its synth feature), as `.npy` + `.txt`.
pub fn write_text(root: &Path, dim: usize) -> PathBuf {
    let table = read_npy(&root.join("language_features/frame_00001_f.npy")).unwrap();
    let d = table.shape[1];
    let mut rng = lsplat_core::Rng::new(5);
    let mut names = vec!["object", "things", "stuff", "texture"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    let mut values: Vec<f32> = (0..4 * dim).map(|_| rng.normal()).collect();
    // Rows 0..3 of the table are the default level (= the objects).
    for k in 0..3 {
        names.push(format!("thing {k}"));
        values.extend((0..dim).map(|j| if j < d { table.data[k * d + j] } else { 0.0 }));
    }
    let p = root.join(format!("text{dim}.npy"));
    write_npy_f32(&p, &[names.len(), dim], &values).unwrap();
    std::fs::write(p.with_extension("txt"), names.join("\n")).unwrap();
    p
}

pub fn scene_with(root: &Path, dataset: &str) -> PathBuf {
    let text = std::fs::read_to_string(root.join("scene.toml"))
        .unwrap()
        .replace("dataset = \"dataset\"", &format!("dataset = \"{dataset}\""));
    let p = root.join(format!("scene_{dataset}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

pub fn label(root: &Path, frame: &str, (w, h): (u32, u32), objects: &str) -> PathBuf {
    let dir = root.join("labels");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{frame}.json"));
    std::fs::write(
        &p,
        format!(
            r#"{{"info": {{"width": {w}, "height": {h}, "name": "{frame}.jpg"}}, "objects": [{objects}]}}"#
        ),
    )
    .unwrap();
    dir
}

/// frame_00003's level-3 objects from synth's map (`language_features/
/// frame_00003_s.npy`): object k's bounding box, as polygon and box, is the ground
/// truth of "thing k" (LERF label objects), and the image size.
pub fn known_objects(r: &Path) -> (Vec<String>, (u32, u32)) {
    let seg = read_npy(&r.join("language_features/frame_00003_s.npy")).unwrap();
    let (h, w) = (seg.shape[1], seg.shape[2]);
    let l3 = &seg.data[3 * w * h..4 * w * h];
    let mut objects = Vec::new();
    for k in 0..3 {
        let pix: Vec<(usize, usize)> = (0..w * h)
            .filter(|&p| l3[p] >= 0.0 && (l3[p] as usize) % 3 == k)
            .map(|p| (p % w, p / w))
            .collect();
        let Some(x0) = pix.iter().map(|p| p.0).min() else {
            continue;
        };
        let x1 = pix.iter().map(|p| p.0).max().unwrap();
        let y0 = pix.iter().map(|p| p.1).min().unwrap();
        let y1 = pix.iter().map(|p| p.1).max().unwrap();
        objects.push(format!(
            r#"{{"category": "thing {k}", "bbox": [{x0}, {y0}, {x1}, {y1}], "segmentation": [[{x0}, {y0}], [{x1}, {y0}], [{x1}, {y1}], [{x0}, {y1}]]}}"#
        ));
    }
    assert!(!objects.is_empty());
    (objects, (w as u32, h as u32))
}

/// `eval lerf --run <run> --labels <labels> --text <text> --out <out> <extra…>`, and
/// the `lerf.json` it wrote.
pub fn eval_lerf(
    run: &Path,
    labels: &Path,
    text: &Path,
    out: &Path,
    extra: &[&str],
) -> serde_json::Value {
    let mut args = vec![
        "eval",
        "lerf",
        "--run",
        s(run),
        "--labels",
        s(labels),
        "--text",
        s(text),
        "--out",
        s(out),
    ];
    args.extend(extra);
    let said = ok(&args);
    assert!(said.contains("mIoU"), "{said}");
    serde_json::from_str(&std::fs::read_to_string(out.join("lerf.json")).unwrap()).unwrap()
}

/// `eval lerf … --protocol 3d`, and the `lerf_3d.json` it wrote.
pub fn eval_lerf_3d(
    run: &Path,
    labels: &Path,
    text: &Path,
    out: &Path,
    extra: &[&str],
) -> serde_json::Value {
    let mut args = vec![
        "eval",
        "lerf",
        "--protocol",
        "3d",
        "--run",
        s(run),
        "--labels",
        s(labels),
        "--text",
        s(text),
        "--out",
        s(out),
    ];
    args.extend(extra);
    let said = ok(&args);
    assert!(said.contains("mIoU"), "{said}");
    serde_json::from_str(&std::fs::read_to_string(out.join("lerf_3d.json")).unwrap()).unwrap()
}

/// Checks the 3D protocol's selections (`lerf_3d.json`) against the library's on
/// `[N, dim]` unit features decoded here: the number of Gaussians selected per query
/// agrees up to those whose normalised relevancy lies within 1e-4 of the threshold.
pub fn check_3d_selections(j: &serde_json::Value, unit: &[f32], dim: usize, text: &Path) {
    use lsplat_query::select::SELECT_THRESHOLD;
    let t = lsplat_data::embeddings::read_embeddings(text).unwrap();
    let neg = t.stack(&lsplat_query::CANONICAL).unwrap();
    let mut any = false;
    for row in j["per_query"].as_array().unwrap() {
        let q = row["query"].as_str().unwrap();
        let rel = lsplat_query::relevancy(unit, dim, &t.stack(&[q]).unwrap(), &neg).unwrap();
        let want =
            lsplat_query::select::select(std::slice::from_ref(&rel), &[], 0, SELECT_THRESHOLD);
        let (lo, hi) = rel
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), v| {
                (a.min(*v), b.max(*v))
            });
        let edge = (0.5 + SELECT_THRESHOLD / 2.0) as f64;
        let uncertain = rel
            .iter()
            .filter(|&&v| ((f64::from(v - lo) / f64::from(hi - lo)) - edge).abs() < 1e-4)
            .count();
        let got = row["selected"].as_u64().unwrap() as usize;
        assert!(
            got.abs_diff(want.gaussians.len()) <= uncertain,
            "{q}: {got} selected, the library selects {} ({uncertain} uncertain)",
            want.gaussians.len()
        );
        any |= got > 0;
    }
    assert!(any, "something is selected: {j}");
}
