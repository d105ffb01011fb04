//! Runs that survive: a process killed with SIGKILL resumes bit for bit, run
//! directories are exclusive, and a diverged run stops naming its step.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use lsplat_data::run::{self, Checkpoint};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lsplat-engine"))
}

/// A small demo run: `extra` are more `--set` values.
fn train(extra: &[&str]) -> Command {
    let mut c = bin();
    c.arg("train");
    for s in [
        "demo.gaussians=1000",
        "demo.cameras=8",
        "demo.width=128",
        "demo.height=96",
        "train.init_std=0.01",
        "train.batch_size=3",
        "log.eval=false",
        "log.every=50",
    ]
    .iter()
    .chain(extra)
    {
        c.args(["--set", s]);
    }
    c
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fails(o: Output) -> String {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!e.contains("panicked"), "{e}");
    e
}

/// `(step, loss)` of every line.
fn losses(dir: &Path) -> Vec<(u64, f32)> {
    run::read_losses(&dir.join(run::METRICS_FILE)).unwrap()
}

/// Starts `cmd` into `out`, kills it with SIGKILL some milliseconds after its first
/// checkpoint at step ≥ `after` appears, and checks what the killed run left.
fn kill_mid_run(mut cmd: Command, out: &Path, after: u64, iterations: u64) {
    let mut child = cmd.arg("--out").arg(out).spawn().unwrap();
    let t0 = Instant::now();
    loop {
        let newest = run::newest_checkpoint(out).ok().flatten();
        if newest.is_some_and(|(s, _)| s >= after) {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before it could be killed");
        }
        assert!(t0.elapsed() < Duration::from_secs(300), "no checkpoint");
        std::thread::sleep(Duration::from_millis(2));
    }
    // Land somewhere between checkpoints, not right after one.
    std::thread::sleep(Duration::from_millis(
        (t0.elapsed().subsec_nanos() % 40) as u64,
    ));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL ({status})");
    // Nothing that looks complete is incomplete: no outputs, no finished marker;
    // every checkpoint under its final name reads back whole.
    for f in ["features.npy", "features.parquet", run::SUMMARY_FILE] {
        assert!(!out.join(f).exists(), "{f} after a kill");
    }
    let ckpts = run::list_checkpoints(out).unwrap();
    assert!(!ckpts.is_empty() && ckpts.last().unwrap().0 < iterations);
    for (step, p) in &ckpts {
        assert_eq!(Checkpoint::read(p).unwrap().step, *step);
    }
}

/// A run killed with SIGKILL and resumed equals an uninterrupted one, bit for bit.
fn kill_and_resume(backend: &[&str], iterations: u64, every: u64, tag: &str) {
    let iters = format!("train.iterations={iterations}");
    let ckpt = format!("log.checkpoint_every={every}");
    let mut sets = vec![iters.as_str(), ckpt.as_str()];
    sets.extend_from_slice(backend);
    let t = tempfile::tempdir().unwrap();
    let (whole, cut) = (t.path().join("whole"), t.path().join("cut"));
    ok(train(&sets).arg("--out").arg(&whole).output().unwrap());
    kill_mid_run(train(&sets), &cut, 2 * every, iterations);
    let resumed_from = run::newest_checkpoint(&cut).unwrap().unwrap().0;
    let out = ok(bin()
        .args(["train", "--resume"])
        .arg(&cut)
        .output()
        .unwrap());
    assert!(
        out.contains(&format!("resumed after step {resumed_from}")),
        "{out}"
    );
    eprintln!("{tag}: killed, resumed after step {resumed_from} of {iterations}");
    assert_eq!(
        std::fs::read(whole.join("features.npy")).unwrap(),
        std::fs::read(cut.join("features.npy")).unwrap(),
        "{tag}: features differ"
    );
    let (a, b) = (losses(&whole), losses(&cut));
    assert_eq!(a.len() as u64, iterations);
    assert_eq!(a, b, "{tag}: every step logged once with the same loss");
    let newest =
        |d: &Path| Checkpoint::read(&run::newest_checkpoint(d).unwrap().unwrap().1).unwrap();
    let (ca, cb) = (newest(&whole), newest(&cut));
    assert_eq!(
        (ca.step, &ca.params, &ca.adam_m, &ca.adam_v),
        (cb.step, &cb.params, &cb.adam_m, &cb.adam_v)
    );
    let summary = |d: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join(run::SUMMARY_FILE)).unwrap()).unwrap()
    };
    assert_eq!(
        summary(&whole)["loss_last_window"],
        summary(&cut)["loss_last_window"]
    );
}

#[test]
fn a_killed_run_resumes_bit_for_bit_on_the_cpu() {
    kill_and_resume(&[], 3000, 100, "cpu");
}

#[test]
fn a_killed_run_resumes_bit_for_bit_on_simt() {
    let cfg = lsplat_core::Config::default();
    let mut device = cfg.device.clone();
    device.backend = lsplat_core::config::BackendKind::Simt;
    if let Err(e) = lsplat_render::Device::open(&device, &cfg.simt) {
        let required = std::env::var("LSPLAT_REQUIRE_SIMT").is_ok_and(|v| v == "1");
        assert!(!required, "LSPLAT_REQUIRE_SIMT=1 but: {e}");
        eprintln!("SKIPPED (no simt runtime): {e}");
        return;
    }
    kill_and_resume(
        &[
            "device.backend=simt",
            "demo.gaussians=300",
            "demo.width=48",
            "demo.height=32",
            "log.every=10",
        ],
        240,
        20,
        "simt",
    );
}

#[test]
fn a_run_directory_belongs_to_one_run() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("run");
    // A second run into a directory in use fails at once.
    let mut first = train(&["train.iterations=1000000", "log.checkpoint_every=0"])
        .arg("--out")
        .arg(&out)
        .spawn()
        .unwrap();
    while !out.join(run::CONFIG_FILE).exists() {
        assert!(first.try_wait().unwrap().is_none(), "the first run ended");
        std::thread::sleep(Duration::from_millis(5));
    }
    let t0 = Instant::now();
    let e = fails(
        train(&["train.iterations=10"])
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap(),
    );
    assert!(e.contains("in use by another run"), "{e}");
    let e = fails(
        bin()
            .args(["train", "--resume"])
            .arg(&out)
            .output()
            .unwrap(),
    );
    assert!(e.contains("in use by another run"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(20), "refused at once");
    first.kill().unwrap();
    first.wait().unwrap();
    let again = |iterations: u32, force: bool| {
        let iters = format!("train.iterations={iterations}");
        let mut c = train(&[iters.as_str()]);
        c.arg("--out").arg(&out);
        if force {
            c.arg("--force");
        }
        c.output().unwrap()
    };
    // Killed before any checkpoint: nothing to resume, so a new run takes the folder
    // (issue 29: such a folder must not block a rerun).
    ok(again(20, false));
    assert_eq!(losses(&out).len(), 20);
    // A finished run is refused, and overwritten with --force.
    let e = fails(again(10, false));
    assert!(e.contains("finished run") && e.contains("--force"), "{e}");
    ok(again(10, true));
    assert_eq!(losses(&out).len(), 10);
    // No temporary file is left, and none under a final name.
    for e in std::fs::read_dir(&out).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "{name}");
    }
}

#[test]
fn default_run_names_never_collide() {
    let t = tempfile::tempdir().unwrap();
    let runs: Vec<_> = (0..3)
        .map(|_| {
            train(&["train.iterations=5"])
                .current_dir(t.path())
                .output()
        })
        .collect();
    for r in runs {
        ok(r.unwrap());
    }
    let children: Vec<_> = (0..3)
        .map(|_| {
            train(&["train.iterations=5"])
                .current_dir(t.path())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let dirs: Vec<_> = std::fs::read_dir(t.path().join("runs")).unwrap().collect();
    assert_eq!(dirs.len(), 6, "one directory per run");
    for d in dirs {
        assert!(run::is_finished(&d.unwrap().path()));
    }
}

#[test]
fn resume_keeps_what_the_run_computes() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    ok(train(&["train.iterations=150"])
        .arg("--out")
        .arg(&a)
        .output()
        .unwrap());
    let resume = |dir: &Path, sets: &[&str]| {
        let mut c = bin();
        c.args(["train", "--resume"]).arg(dir);
        for s in sets {
            c.args(["--set", s]);
        }
        c.output().unwrap()
    };
    let e = fails(resume(&a, &[]));
    assert!(
        e.contains("already trained 150") && e.contains("train.iterations"),
        "{e}"
    );
    let e = fails(resume(&a, &["train.iterations=300", "train.lr=0.01"]));
    assert!(
        e.contains("--set train.lr=0.01") && e.contains("`train.lr`"),
        "{e}"
    );
    let e = fails(
        bin()
            .args(["train", "--resume"])
            .arg(&a)
            .args(["--out", "x"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("--out"), "{e}");
    // Training a finished run further equals training that long at once.
    ok(resume(&a, &["train.iterations=300", "log.every=7"]));
    ok(train(&["train.iterations=300"])
        .arg("--out")
        .arg(&b)
        .output()
        .unwrap());
    assert_eq!(
        std::fs::read(a.join("features.npy")).unwrap(),
        std::fs::read(b.join("features.npy")).unwrap()
    );
    assert_eq!(losses(&a), losses(&b));
    assert!(
        std::fs::read_to_string(a.join(run::CONFIG_FILE))
            .unwrap()
            .contains("iterations = 300")
    );
}

#[test]
fn a_diverging_run_stops_with_the_step() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("run");
    let e = fails(
        train(&[
            "train.iterations=100",
            // Starting values near f32's largest (train.lr is at most 1, so a huge
            // start is what can still blow the loss up).
            "train.init_std=3e38",
            "train.normalize=false",
            "log.every=10",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap(),
    );
    assert!(
        e.contains("the loss is not finite at step 0 (0-based)"),
        "{e}"
    );
    assert!(e.contains("no checkpoint was written"), "{e}");
    assert!(!run::is_finished(&out) && run::list_checkpoints(&out).unwrap().is_empty());
    let l = losses(&out);
    assert_eq!(l.len(), 10, "the failing window is logged");
    assert!(!l[0].1.is_finite());
}
