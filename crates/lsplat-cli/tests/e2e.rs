//! End to end on real geometry: synth (biker splat, orbit cameras) → import → train →
//! the outputs open in pyarrow and plyfile.

mod common;

use common::python;
use std::path::Path;
use std::process::Command;

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

#[test]
fn synth_import_train_and_read_back() {
    let Some(ply) = lsplat_data::testdata::test_file("splats/playcanvas_biker.inria_sh0.ply")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = run(bin()
        .args([
            "synth", "--orbit", "12", "--width", "256", "--height", "192", "--splats",
        ])
        .arg(&ply)
        .arg("--out")
        .arg(d.join("synth")));
    assert!(out.contains("12 cameras, 152746 Gaussians"), "{out}");
    run(bin()
        .args(["import", "langsplat", "--source"])
        .arg(d.join("synth/language_features"))
        .arg("--out")
        .arg(d.join("synth/dataset")));
    let run_dir = d.join("run");
    run(bin()
        .args(["train", "--scene"])
        .arg(d.join("synth/scene.toml"))
        .args([
            "--set",
            "train.iterations=300",
            "--set",
            "train.init_std=0.01",
            "--set",
            "log.every=50",
            "--out",
        ])
        .arg(&run_dir));
    let losses: Vec<f64> = std::fs::read_to_string(run_dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert_eq!(losses.len(), 300);
    let first = losses[..10].iter().sum::<f64>() / 10.0;
    let last = losses[290..].iter().sum::<f64>() / 10.0;
    eprintln!("loss {first:.5} -> {last:.5} ({:.1}x)", first / last);
    assert!(first / last >= 5.0, "loss fell only {:.1}x", first / last);
    if let Some(py) = python() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_outputs.py");
        let o = run(Command::new(py)
            .arg(script)
            .arg(d.join("synth/dataset"))
            .arg(&run_dir)
            .args(["152746", "3", "12"]));
        eprintln!("{o}");
    }
}
