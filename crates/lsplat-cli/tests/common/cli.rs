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

/// A tiny splat (the demo's Gaussians) with a 512-D synth dataset beside it.
pub struct Synth {
    pub _dir: tempfile::TempDir,
    pub root: PathBuf,
}

pub fn synth_512() -> Synth {
    synth_512_orbit(4)
}

/// [`synth_512`] with `cameras` orbit cameras.
pub fn synth_512_orbit(cameras: u32) -> Synth {
    let cameras = cameras.to_string();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
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
    lsplat_data::ply::write_ply(&root.join("tiny.ply"), &ply).unwrap();
    ok(&[
        "synth",
        "--splats",
        s(&root.join("tiny.ply")),
        "--orbit",
        &cameras,
        "--width",
        "48",
        "--height",
        "36",
        "--up",
        "z",
        "--objects",
        "3",
        "--dim",
        "512",
        "--out",
        s(&root),
    ]);
    ok(&[
        "import",
        "langsplat",
        "--source",
        s(&root.join("language_features")),
        "--out",
        s(&root.join("d512")),
    ]);
    Synth { _dir: dir, root }
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
