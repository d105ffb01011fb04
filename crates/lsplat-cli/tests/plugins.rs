//! scratch
use lsplat_core::config::DemoConfig;
use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lsplat-engine"))
}
fn ok(args: &[&str]) -> String {
    let o = bin().args(args).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn scratch() {
    let root = Path::new("/tmp/plugscratch");
    std::fs::create_dir_all(root).unwrap();
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
    for dim in ["512", "3"] {
        let r = root.join(format!("s{dim}"));
        ok(&[
            "synth",
            "--splats",
            s(&root.join("tiny.ply")),
            "--orbit",
            "4",
            "--width",
            "48",
            "--height",
            "36",
            "--up",
            "z",
            "--objects",
            "3",
            "--dim",
            dim,
            "--out",
            s(&r),
        ]);
        ok(&[
            "import",
            "langsplat",
            "--source",
            s(&r.join("language_features")),
            "--out",
            s(&r.join("dataset")),
        ]);
    }
}
