//! The `lsplat-engine` binary end to end.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lsplat-engine"))
}

#[test]
fn train_smoke_writes_the_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = bin()
        .args([
            "train",
            "--set",
            "train.iterations=50",
            "--set",
            "log.every=10",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("recovered-feature similarity"), "{stdout}");
    for f in [
        "config.toml",
        "features.npy",
        "metrics.jsonl",
        "summary.json",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let cfg = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(
        cfg.contains("iterations = 50"),
        "resolved config recorded: {cfg}"
    );
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 50, "one metrics line per step");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["steps"], 50);
    let npy = std::fs::read(out.join("features.npy")).unwrap();
    assert_eq!(&npy[..6], b"\x93NUMPY");
    // No temporary files are left behind.
    assert!(
        std::fs::read_dir(&out).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp"))
    );
}

#[test]
fn bad_overrides_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = bin()
        .args(["train", "--set", "train.iterationz=5", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown configuration key `train.iterationz`"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "nothing is written for a bad configuration");
    let o = bin()
        .args([
            "train",
            "--set",
            "device.backend=hip",
            "--set",
            "train.iterations=1",
        ])
        .arg("--out")
        .arg(dir.path().join("hip"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    if cfg!(feature = "hip") {
        // Compiled in: it trains on an AMD GPU, or says why it cannot.
        assert!(
            o.status.success() || err.contains("the `hip` backend is unavailable"),
            "{err}"
        );
    } else {
        assert!(!o.status.success());
        assert!(
            err.contains("not compiled in (build with `--features hip`)"),
            "{err}"
        );
    }
}

#[test]
fn bench_prints_one_json_line() {
    let o = bin()
        .args([
            "bench",
            "--iters",
            "5",
            "--warmup",
            "1",
            "--json",
            "--set",
            "demo.cameras=4",
            "--set",
            "demo.gaussians=500",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    for k in ["it_per_s", "ms", "cache_bytes", "nnz", "valid_pixels"] {
        assert!(v.get(k).is_some(), "{k} missing in {line}");
    }
    assert!(v["ms"]["rasterize"].is_number());
}

#[test]
fn help_documents_every_option() {
    let o = bin().args(["train", "--help"]).output().unwrap();
    let h = String::from_utf8_lossy(&o.stdout);
    for opt in ["--scene", "--set", "--out"] {
        assert!(h.contains(opt), "{opt} undocumented: {h}");
    }
    let o = bin().args(["bench", "--help"]).output().unwrap();
    let h = String::from_utf8_lossy(&o.stdout);
    for opt in ["--iters", "--warmup", "--json", "--set"] {
        assert!(h.contains(opt), "{opt} undocumented: {h}");
    }
}

#[test]
fn example_scenes_parse_and_missing_files_are_named() {
    let scenes = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenes");
    let mut n = 0;
    for entry in std::fs::read_dir(&scenes).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let cfg =
            lsplat_core::Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        cfg.validate().unwrap();
        n += 1;
        if cfg.scene.is_demo() {
            continue;
        }
        // The templates' files do not exist here: a clear error, no panic, no output.
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let o = bin()
            .args(["train", "--scene"])
            .arg(&path)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("error:") && !err.contains("panicked"), "{err}");
        assert!(!out.exists());
    }
    assert!(n >= 4, "one example per camera format plus the demo");
}

#[test]
fn unknown_scene_key_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.toml");
    std::fs::write(&p, "[scene]\nsplats = \"a.ply\"\nspalts = \"b.ply\"\n").unwrap();
    let o = bin().args(["train", "--scene"]).arg(&p).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("s.toml") && err.contains("spalts"), "{err}");
}
