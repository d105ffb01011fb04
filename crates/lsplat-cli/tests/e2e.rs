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

/// Datasets rewritten by pyarrow with every compression it commonly writes, and by a
/// pandas round trip with its defaults (snappy, LargeUtf8 names, list features),
/// load to the same labels.
#[test]
fn datasets_written_by_pyarrow_and_pandas_load() {
    let Some(py) = python() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("ours");
    let mut w = lsplat_data::dataset::DatasetWriter::create(&src, 3).unwrap();
    let names = vec!["frame_a".to_string(), "frame_b".to_string()];
    for (k, name) in names.iter().enumerate() {
        let map: Vec<i32> = (0..48).map(|p| ((p / 5 + k) % 4) as i32 - 1).collect();
        let features: Vec<f32> = (0..15).map(|v| v as f32 * 0.125 - k as f32).collect();
        w.add_image(
            name,
            (8, 6),
            &features,
            &[&map[..], &map[..], &map[..], &map[..]],
        )
        .unwrap();
    }
    w.finish().unwrap();
    let want = lsplat_data::dataset::load_dataset_labels(&src, 2, &names).unwrap();
    let script = r#"
import sys, os, pyarrow.parquet as pq
src, out = sys.argv[1], sys.argv[2]
variants = {"default": {}, "none": {"compression": "none"}}
for c in ["snappy", "gzip", "lz4", "zstd", "brotli"]:
    variants[c] = {"compression": c}
for name, kw in variants.items():
    os.makedirs(os.path.join(out, name))
    for f in ["features.parquet", "masks.parquet"]:
        pq.write_table(pq.read_table(os.path.join(src, f)), os.path.join(out, name, f), **kw)
try:
    import pandas as pd
except ImportError:
    print("no pandas: pandas round trip not exercised")
    sys.exit(0)
os.makedirs(os.path.join(out, "pandas"))
for f in ["features.parquet", "masks.parquet"]:
    pd.read_parquet(os.path.join(src, f)).to_parquet(os.path.join(out, "pandas", f))
"#;
    let out = t.path().join("theirs");
    run(Command::new(py).args(["-c", script]).arg(&src).arg(&out));
    let mut seen = Vec::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let dir = e.unwrap().path();
        let got = lsplat_data::dataset::load_dataset_labels(&dir, 2, &names)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert_eq!(got, want, "{}", dir.display());
        seen.push(dir.file_name().unwrap().to_string_lossy().into_owned());
    }
    seen.sort();
    eprintln!("read back: {seen:?}");
    assert!(seen.len() >= 7, "{seen:?}");
}
