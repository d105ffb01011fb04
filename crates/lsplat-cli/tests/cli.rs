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
    // The printed loss summary: the first and last 25 steps (never overlapping), the
    // same numbers as summary.json and as the metrics file.
    let (a, b) = (&summary["loss_first_window"], &summary["loss_last_window"]);
    assert_eq!((&a["first_step"], &a["last_step"]), (&0.into(), &24.into()));
    assert_eq!(
        (&b["first_step"], &b["last_step"]),
        (&25.into(), &49.into())
    );
    let losses: Vec<f64> = metrics
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let mean = |r: &[f64]| r.iter().map(|l| *l as f32 as f64).sum::<f64>() / r.len() as f64;
    assert!((a["mean"].as_f64().unwrap() - mean(&losses[..25])).abs() < 1e-12);
    assert!((b["mean"].as_f64().unwrap() - mean(&losses[25..])).abs() < 1e-12);
    let line = format!(
        "loss: mean {:.6} over steps 0–24 -> mean {:.6} over steps 25–49 ({:.1}x lower)",
        a["mean"].as_f64().unwrap(),
        b["mean"].as_f64().unwrap(),
        summary["loss_ratio"].as_f64().unwrap()
    );
    assert!(stdout.contains(&line), "{line} not in {stdout}");
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
fn solve_writes_every_level_with_held_out_figures() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = bin()
        .args([
            "solve",
            "--method",
            "lsq",
            "--levels",
            "1,3",
            "--set",
            "demo.cameras=8",
            "--set",
            "eval.holdout=4",
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
    assert!(stdout.contains("held-out cameras (2)"), "{stdout}");
    let cfg = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(
        cfg.contains("solver = \"lsq\"") && cfg.contains("normalize = false"),
        "a later render of the solution composites it as stored: {cfg}"
    );
    for level in [1, 3] {
        let d = out.join(format!("level_{level}"));
        for f in ["features.npy", "features.parquet", "summary.json"] {
            assert!(d.join(f).is_file(), "level {level}: {f} missing");
        }
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary["solver"], "lsq");
        assert_eq!(summary["level"], level);
        assert_eq!(summary["eval_cameras"], 6);
        assert_eq!(summary["heldout_cameras"], 2);
        assert!(summary["heldout_mean_cosine"].as_f64().unwrap() > 0.5);
        assert!(summary["lsq_converged"].as_bool().unwrap());
        assert!(summary["unweighted_gaussians"].is_number());
        // Each level's folder is a finished run of that level: `render` reads it.
        let cfg = std::fs::read_to_string(d.join("config.toml")).unwrap();
        assert!(cfg.contains(&format!("level = {level}")), "{cfg}");
        let r = bin()
            .args(["render", "--png-only", "--cameras", "demo_000", "--run"])
            .arg(&d)
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "render of level {level}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    // The run's own folder names its level folders instead of failing on a missing file.
    let r = bin()
        .args(["render", "--png-only", "--run"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        !r.status.success() && err.contains("level_1, level_3"),
        "{err}"
    );
    // Settings that make no sense are errors.
    let o = bin()
        .args(["solve", "--method", "average", "--levels", "1,4"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("solve.levels"));
    let o = bin()
        .args(["train", "--set", "solve.levels=[1,2]"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("several levels"));
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
    let o = bin().args(["solve", "--help"]).output().unwrap();
    let h = String::from_utf8_lossy(&o.stdout);
    for opt in ["--method", "--levels", "--scene", "--set", "--out"] {
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

/// Runs `args`, expects a failure whose message contains every one of `want`, no
/// panic, and no `out` folder.
fn refused(args: &[&str], want: &[&str], out: &std::path::Path) {
    let o = bin().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // 2: clap refused a flag's value; 1: the command failed.
    assert_eq!(
        o.status.code(),
        Some(if err.contains("invalid value") { 2 } else { 1 }),
        "{args:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: `{w}` not in {err}");
    }
    assert!(!out.exists(), "{args:?} wrote {}", out.display());
}

#[test]
fn nonsense_settings_fail_naming_the_file_or_flag() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let out = d.join("out");
    let o = out.to_str().unwrap();
    let path = |name: &str| d.join(name).to_str().unwrap().to_string();
    std::fs::write(d.join("empty.toml"), "").unwrap();
    std::fs::write(d.join("train_only.toml"), "[train]\niterations = 5\n").unwrap();
    std::fs::write(d.join("level.toml"), "[demo]\n[scene]\nlevel = 7\n").unwrap();
    for scene in ["empty.toml", "train_only.toml"] {
        refused(
            &["train", "--scene", &path(scene), "--out", o],
            &[scene, "names no scene inputs"],
            &out,
        );
    }
    refused(
        &["train", "--scene", &path("level.toml"), "--out", o],
        &["level.toml", "scene.level"],
        &out,
    );
    refused(
        &["train", "--set", "train.iterations=0", "--out", o],
        &["train.iterations"],
        &out,
    );
    refused(
        &["train", "--set", "device.threads=100000", "--out", o],
        &["device.threads", "hardware threads"],
        &out,
    );
    refused(&["bench", "--iters", "0"], &["--iters"], &out);
    for flag in ["--orbit", "--width", "--height"] {
        refused(
            &["synth", "--splats", "x.ply", flag, "0", "--out", o],
            &[flag],
            &out,
        );
    }
    // A tiny splat, a camera file without cameras, a PLY without vertices.
    let mut ply = lsplat_data::ply::SplatPly::default();
    for i in 0..10 {
        ply.gaussians.means.push([i as f32 * 0.1, 0.0, 0.0]);
        ply.gaussians.log_scales.push([-3.0; 3]);
        ply.gaussians.rotations.push([1.0, 0.0, 0.0, 0.0]);
        ply.gaussians.opacity_logits.push(1.0);
        ply.sh_dc.push([0.0; 3]);
    }
    lsplat_data::ply::write_ply(&d.join("s.ply"), &ply).unwrap();
    let header = "ply\nformat binary_little_endian 1.0\nelement vertex 0\n";
    let props: String = [
        "x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
        "rot_0", "rot_1", "rot_2", "rot_3",
    ]
    .iter()
    .map(|p| format!("property float {p}\n"))
    .collect();
    std::fs::write(d.join("zero.ply"), format!("{header}{props}end_header\n")).unwrap();
    std::fs::write(d.join("cameras.json"), "[]").unwrap();
    std::fs::write(
        d.join("no_cams.toml"),
        "[scene]\nsplats = \"s.ply\"\ncameras = \"cameras.json\"\ndataset = \"ds\"\n",
    )
    .unwrap();
    std::fs::write(
        d.join("zero.toml"),
        "[scene]\nsplats = \"zero.ply\"\ncameras = \"cameras.json\"\ndataset = \"ds\"\n",
    )
    .unwrap();
    refused(
        &["train", "--scene", &path("no_cams.toml"), "--out", o],
        &["cameras.json", "no cameras"],
        &out,
    );
    refused(
        &["train", "--scene", &path("zero.toml"), "--out", o],
        &["zero.ply", "no Gaussians"],
        &out,
    );
    refused(
        &["synth", "--splats", &path("zero.ply"), "--out", o],
        &["zero.ply", "no Gaussians"],
        &out,
    );
    // Buffers that cannot fit: a clear error, not an aborted process.
    refused(
        &[
            "synth",
            "--splats",
            &path("s.ply"),
            "--orbit",
            "1",
            "--width",
            "60000",
            "--height",
            "60000",
            "--out",
            o,
        ],
        &["frame_00001", "memory"],
        &out,
    );
    refused(
        &[
            "synth",
            "--splats",
            &path("s.ply"),
            "--orbit",
            "1",
            "--width",
            "200000",
            "--height",
            "200000",
            "--out",
            o,
        ],
        &["frame_00001", "2^32"],
        &out,
    );
    refused(
        &[
            "train",
            "--set",
            "demo.width=60000",
            "--set",
            "demo.height=60000",
            "--out",
            o,
        ],
        &["60000x60000", "memory"],
        &out,
    );
}

#[test]
fn top_level_help_lists_every_command_and_stderr_has_no_colour_off_a_terminal() {
    let o = bin().arg("--help").output().unwrap();
    let h = String::from_utf8_lossy(&o.stdout);
    let commands = h.split("Commands:").nth(1).unwrap_or_default();
    for c in ["train", "bench", "info", "import", "synth"] {
        assert!(
            commands.lines().any(|l| l.trim_start().starts_with(c)),
            "{c} not listed: {h}"
        );
    }
    let o = bin().args(["import", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("langsplat"));
    let t = tempfile::tempdir().unwrap();
    let o = bin()
        .args([
            "train",
            "--set",
            "train.iterations=3",
            "--set",
            "demo.cameras=2",
            "--set",
            "log.eval=false",
            "--out",
        ])
        .arg(t.path().join("r"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("INFO") && !err.contains('\x1b'), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("loss: mean")
            && out.contains("over steps 0–0")
            && out.contains("over steps 2–2"),
        "{out}"
    );
}

/// Off a terminal (stderr piped, as under CI, nohup or Slurm), `train`, `synth`,
/// `render` and `query`-style commands print plain progress lines — no ANSI — at the
/// configured cadence: by time (`log.progress_every_s`) and by share of the work
/// (`log.progress_every_percent`), each with the count, the rate, the time left and
/// (for training) the loss; a first line when the work starts and a last when it ends
/// (issue 29, point 14).
#[test]
fn progress_lines_off_a_terminal() {
    let t = tempfile::tempdir().unwrap();
    let run = t.path().join("r");
    // By time alone (percent 100: only the end would print).
    let o = bin()
        .args([
            "train",
            "--set",
            "train.iterations=1500",
            "--set",
            "demo.cameras=4",
            "--set",
            "log.eval=false",
            "--set",
            "log.every=50",
            "--set",
            "log.progress_every_s=0.02",
            "--set",
            "log.progress_every_percent=100",
            "--out",
        ])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains('\x1b'), "no ANSI off a terminal: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("train: ")).collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.starts_with("train: started, 1500 steps")),
        "{err}"
    );
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("train: done, 1500 steps")),
        "{err}"
    );
    let steady: Vec<&&str> = lines
        .iter()
        .filter(|l| {
            l.contains("/1500 steps (") && l.contains("steps/s, ETA ") && l.contains("loss ")
        })
        .collect();
    assert!(steady.len() >= 3, "lines every 0.02 s: {err}");
    // By share of the work: 4 cameras at 25 % each, one line per camera.
    let o = bin()
        .args(["render", "--run"])
        .arg(&run)
        .arg("--out")
        .arg(t.path().join("render"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    for k in 1..=4 {
        assert!(
            err.contains(&format!("render: {k}/4 cameras ({}%)", 25 * k)),
            "{err}"
        );
    }
    // solve: its pass over the fitted cameras, then the least-squares iterations.
    let o = bin()
        .args([
            "solve",
            "--method",
            "lsq",
            "--set",
            "demo.cameras=4",
            "--set",
            "log.eval=false",
            "--set",
            "log.progress_every_percent=25",
            "--out",
        ])
        .arg(t.path().join("solved"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    for k in 1..=4 {
        assert!(
            err.contains(&format!("solve: {k}/4 cameras ({}%)", 25 * k)),
            "{err}"
        );
    }
    assert!(
        err.contains("solve lsq: started, 500 iterations")
            && err.contains("solve lsq: done, ")
            && err.contains("relative residual"),
        "{err}"
    );
    // synth has no configuration: the defaults (every 30 s or 10 %).
    let ply = t.path().join("tiny.ply");
    let demo = lsplat_data::demo::generate(&Default::default(), 1).unwrap();
    let n = demo.scene.gaussians.len();
    lsplat_data::ply::write_ply(
        &ply,
        &lsplat_data::ply::SplatPly {
            gaussians: demo.scene.gaussians,
            sh_degree: 0,
            sh_dc: vec![[0.0; 3]; n],
            sh_rest: Vec::new(),
            extra_names: Vec::new(),
            extra: Vec::new(),
        },
    )
    .unwrap();
    let o = bin()
        .args([
            "synth", "--orbit", "10", "--width", "32", "--height", "24", "--splats",
        ])
        .arg(&ply)
        .arg("--out")
        .arg(t.path().join("s"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("synth: started, 10 cameras (progress every 30s or 10%)"),
        "{err}"
    );
    for k in 1..=10 {
        assert!(
            err.contains(&format!("synth: {k}/10 cameras ({}%)", 10 * k)),
            "{err}"
        );
    }
    assert!(!err.contains('\x1b'), "{err}");
}
