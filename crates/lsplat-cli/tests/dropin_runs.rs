//! Issue 29 (part A), runs: bare scene file names, one rule for relative paths,
//! honest resumes, Ctrl-C / SIGTERM, settings refused before a run folder exists,
//! `device.backend = auto` and the configuration reference.

mod common;

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::cli::{bin, fails, ok, s, synth_scene};
use lsplat_data::run;

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Point 1: `cd scenes && lsplat-engine train --scene scene.toml` (no folder part)
/// works for train, solve and bench; point 11: the scene file's relative paths are
/// taken relative to it and recorded resolved.
#[test]
fn a_scene_file_without_a_folder_part_loads() {
    let sc = synth_scene(3, 3, 4, "dataset");
    let runs = tempfile::tempdir().unwrap();
    let in_scene = |args: &[&str]| {
        let o = bin().current_dir(&sc.root).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr_of(&o));
    };
    let r = runs.path().join("train");
    in_scene(&[
        "train",
        "--scene",
        "scene.toml",
        "--set",
        "train.iterations=3",
        "--out",
        s(&r),
    ]);
    let s_out = runs.path().join("solve");
    in_scene(&[
        "solve",
        "--scene",
        "scene.toml",
        "--method",
        "average",
        "--out",
        s(&s_out),
    ]);
    in_scene(&[
        "bench",
        "--scene",
        "scene.toml",
        "--iters",
        "1",
        "--warmup",
        "0",
    ]);
    let cfg = std::fs::read_to_string(r.join(run::CONFIG_FILE)).unwrap();
    let root = sc.root.canonicalize().unwrap();
    for want in [
        format!("dataset = {:?}", root.join("dataset").display().to_string()),
        format!(
            "cameras = {:?}",
            root.join("cameras.json").display().to_string()
        ),
    ] {
        assert!(cfg.contains(&want), "{want} not in\n{cfg}");
    }
}

/// Point 11: values given with --set are relative to the working directory, values
/// in a scene file to the file; config.toml records both resolved (absolute, no
/// `.`/`..`).
#[test]
fn relative_paths_follow_one_rule_and_are_recorded_resolved() {
    let sc = synth_scene(3, 3, 4, "dataset");
    let parent = sc.root.parent().unwrap().canonicalize().unwrap();
    let out = parent.join("run");
    let o = bin()
        .current_dir(&parent)
        .args(["train", "--scene", "scene/scene.toml", "--out", "run"])
        .args(["--set", "train.iterations=2"])
        .args(["--set", "scene.dataset=./scene/../scene/dataset"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    let cfg = lsplat_core::Config::load(&out.join(run::CONFIG_FILE)).unwrap();
    let root = parent.join("scene");
    assert_eq!(
        cfg.scene.dataset.unwrap(),
        root.join("dataset"),
        "--set: the working directory"
    );
    assert_eq!(
        cfg.scene.cameras.unwrap(),
        root.join("cameras.json"),
        "file: the file's folder"
    );
    // The same value from another working directory names another folder.
    let e = fails(&[
        "train",
        "--scene",
        s(&root.join("scene.toml")),
        "--set",
        "scene.dataset=scene/dataset",
        "--out",
        s(&parent.join("run2")),
    ]);
    assert!(e.contains("scene/dataset"), "{e}");
}

/// The demo scene of the signal and resume tests, with `extra` settings.
fn demo_train(out: &Path, extra: &[&str]) -> Command {
    let mut c = bin();
    c.arg("train").arg("--out").arg(out);
    for s in [
        "demo.gaussians=800",
        "demo.cameras=6",
        "demo.width=64",
        "demo.height=48",
        "log.progress=false",
        "log.every=5",
    ] {
        c.args(["--set", s]);
    }
    for s in extra {
        c.args(["--set", s]);
    }
    c
}

fn features(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("features.npy")).unwrap()
}

/// Point 2: a corrupt newest checkpoint is skipped with its reason, and the run
/// continues from the previous one bit for bit; a checkpoint of another run is not
/// taken; a changed input refuses the resume.
#[test]
fn resume_skips_a_corrupt_newest_checkpoint_and_names_it() {
    let t = tempfile::tempdir().unwrap();
    let whole = t.path().join("whole");
    let o = demo_train(&whole, &["train.iterations=25"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    let a = t.path().join("a");
    let every = ["log.checkpoint_every=5", "log.checkpoint_keep=5"];
    let o = demo_train(&a, &[&["train.iterations=20"][..], &every].concat())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    let newest = a.join("checkpoints").join(run::checkpoint_name(20));
    let mut b = std::fs::read(&newest).unwrap();
    let at = b.len() - 10;
    b[at] ^= 0x04;
    std::fs::write(&newest, &b).unwrap();
    let o = bin()
        .args(["train", "--resume", s(&a), "--set", "train.iterations=25"])
        .output()
        .unwrap();
    let e = stderr_of(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("skipping checkpoint") && e.contains("step-000000020") && e.contains("corrupt"),
        "{e}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("resumed after step 15"));
    assert_eq!(
        features(&a),
        features(&whole),
        "continued from step 15 bit for bit"
    );
    // A checkpoint from another run (another learning rate) is never taken.
    let other = t.path().join("other");
    let o = demo_train(
        &other,
        &[
            "train.iterations=30",
            "train.lr=0.01",
            "log.checkpoint_every=30",
        ],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    std::fs::copy(
        other.join("checkpoints").join(run::checkpoint_name(30)),
        a.join("checkpoints").join(run::checkpoint_name(30)),
    )
    .unwrap();
    let o = bin()
        .args(["train", "--resume", s(&a), "--set", "train.iterations=40"])
        .output()
        .unwrap();
    let e = stderr_of(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("step-000000030") && e.contains("another run") && e.contains("`train.lr`"),
        "{e}"
    );
}

/// Reads a child's stderr lines on a thread.
fn lines_of(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `what` (all lines so far returned).
fn wait_for(rx: &mpsc::Receiver<String>, what: &str, seen: &mut Vec<String>) {
    let end = Instant::now() + Duration::from_secs(300);
    while Instant::now() < end {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            let hit = l.contains(what);
            seen.push(l);
            if hit {
                return;
            }
        }
    }
    panic!("no `{what}` line: {seen:?}");
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// Waits for the child (at most 5 minutes) and returns its exit code and stderr.
fn finish(
    mut child: std::process::Child,
    rx: mpsc::Receiver<String>,
    mut seen: Vec<String>,
) -> (Option<i32>, String) {
    let end = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < end, "the run did not stop: {seen:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    seen.extend(rx.iter());
    (status.code(), seen.join("\n"))
}

/// Point 3, with real signals on the built binary: the first SIGINT (SIGTERM) ends
/// the current step, checkpoints it, writes summary.json marked interrupted and
/// exits 130 (143) with the command that resumes; the run stopped long before its
/// first scheduled checkpoint resumes and finishes.
#[test]
fn ctrl_c_and_sigterm_checkpoint_the_step_and_exit_130_and_143() {
    let t = tempfile::tempdir().unwrap();
    for (sig, code) in [("-INT", 130), ("-TERM", 143)] {
        let out = t.path().join(format!("run{code}"));
        // No checkpoint is scheduled before the end (checkpoint_every = 0).
        let mut child = demo_train(
            &out,
            &["train.iterations=1000000", "log.checkpoint_every=0"],
        )
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
        let rx = lines_of(&mut child);
        let mut seen = Vec::new();
        wait_for(&rx, "training", &mut seen);
        std::thread::sleep(Duration::from_millis(300));
        signal(child.id(), sig);
        let (got, err) = finish(child, rx, seen);
        assert_eq!(got, Some(code), "{err}");
        assert!(
            err.contains(&format!(
                "continue with `lsplat-engine train --resume {}`",
                out.display()
            )),
            "{err}"
        );
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join(run::SUMMARY_FILE)).unwrap()).unwrap();
        assert_eq!(summary["status"], "interrupted");
        let steps = summary["steps"].as_u64().unwrap();
        assert!((1..1_000_000).contains(&steps), "{steps}");
        assert!(!run::is_finished(&out));
        let ck: Vec<u64> = run::list_checkpoints(&out)
            .unwrap()
            .iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(
            ck,
            [steps],
            "the step it stopped after is checkpointed, and only it"
        );
        let losses = run::read_losses(&out.join(run::METRICS_FILE)).unwrap();
        assert_eq!(losses.len() as u64, steps, "every step's loss is on disk");
        // A new run is refused there (it is resumable), and the resume finishes it.
        let e = fails(&["train", "--out", s(&out)]);
        assert!(
            e.contains("interrupted run") && e.contains("--resume"),
            "{e}"
        );
        let more = format!("train.iterations={}", steps + 3);
        ok(&["train", "--resume", s(&out), "--set", &more]);
        assert!(run::is_finished(&out));
    }
}

/// Point 3: a second signal exits at once (the first is still finishing a long step),
/// and a run killed before any checkpoint does not block a new run in its folder.
#[test]
fn a_second_signal_exits_at_once_and_a_killed_run_does_not_block_a_rerun() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("slow");
    // Steps of about a second: no operator cache, a large image.
    let mut child = demo_train(
        &out,
        &[
            "train.iterations=1000",
            "demo.width=1600",
            "demo.height=1200",
            "demo.gaussians=20000",
            "render.cache=none",
        ],
    )
    .stderr(Stdio::piped())
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    let rx = lines_of(&mut child);
    let mut seen = Vec::new();
    wait_for(&rx, "training", &mut seen);
    std::thread::sleep(Duration::from_millis(200));
    signal(child.id(), "-INT");
    std::thread::sleep(Duration::from_millis(30));
    signal(child.id(), "-INT");
    let (got, err) = finish(child, rx, seen);
    assert_eq!(got, Some(130), "{err}");
    assert!(
        !err.contains("continue with"),
        "exited at once, without finishing: {err}"
    );
    // Killed before any checkpoint: nothing to resume, so a new run takes the folder.
    assert!(run::list_checkpoints(&out).unwrap().is_empty());
    let o = demo_train(&out, &["train.iterations=3"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert!(run::is_finished(&out));
}

/// Point 4: settings that the scene makes impossible are found before the run
/// folder is created: nothing is left behind.
#[test]
fn settings_errors_leave_no_run_folder() {
    let t = tempfile::tempdir().unwrap();
    for (sets, says) in [
        (
            &["train.batch_size=7"][..],
            "train.batch_size = 7 exceeds the 6 fitted cameras",
        ),
        (
            &["eval.holdout=2", "train.batch_size=4"][..],
            "3 of 6 are held out",
        ),
        (&["eval.holdout=9"][..], "holds out none of the 6 cameras"),
        (&["simt.warp=48"][..], "simt.warp"),
        (&["train.model=nope"][..], "train.model"),
        (
            &["scene.dataset=/nonexistent/ds"][..],
            "`scene.splats` is required",
        ),
    ] {
        let out = t.path().join("run");
        let o = demo_train(&out, sets).output().unwrap();
        let e = stderr_of(&o);
        assert!(!o.status.success() && e.contains(says), "{sets:?}: {e}");
        assert!(!out.exists(), "{sets:?} left {}", out.display());
    }
    // `solve` too.
    let out = t.path().join("solved");
    let e = fails(&[
        "solve",
        "--method",
        "lsq",
        "--set",
        "eval.holdout=50",
        "--out",
        s(&out),
    ]);
    assert!(e.contains("eval.holdout") && !out.exists(), "{e}");
}

/// Point 15: `device.backend = auto` (the default) says what it chose and why, and
/// the run records the backend chosen, so a resume reopens it. Without a GPU (as
/// here) it is the CPU.
#[test]
fn auto_backend_says_what_it_chose_and_records_it() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("run");
    let o = demo_train(&out, &["train.iterations=2"]).output().unwrap();
    let e = stderr_of(&o);
    assert!(o.status.success(), "{e}");
    let line = e
        .lines()
        .find(|l| l.contains("device.backend = auto:"))
        .unwrap_or_else(|| panic!("{e}"));
    let cfg = lsplat_core::Config::load(&out.join(run::CONFIG_FILE)).unwrap();
    let chosen = cfg.device.backend.name();
    assert!(line.contains(&format!("auto: {chosen} (")), "{line}");
    let info = ok(&["info"]);
    if (info.contains("cuda: libcuda could not be loaded") || !info.contains("cuda:0"))
        && !info.contains("hip:0")
    {
        assert_eq!(chosen, "cpu", "{info}");
        assert!(
            line.contains("no usable GPU: NVIDIA: ") && line.contains("AMD: "),
            "{line}"
        );
    }
    // Pinned backends are taken as given.
    let o = demo_train(
        &t.path().join("pinned"),
        &["train.iterations=2", "device.backend=cpu"],
    )
    .output()
    .unwrap();
    assert!(o.status.success() && !stderr_of(&o).contains("device.backend = auto"));
}

/// Point 16: `config` lists every key with type, default, range and doc; `config
/// --toml` is a complete scene file that trains (the demo).
#[test]
fn config_prints_the_reference_and_a_complete_scene_file() {
    let text = ok(&["config"]);
    for want in [
        "train.lr = 0.0025    (float; (0, 1])",
        "device.backend = \"auto\"",
        "scene.splats = unset    (path (optional))",
        "Adam learning rate",
    ] {
        assert!(text.contains(want), "{want} not in:\n{text}");
    }
    let toml = ok(&["config", "--toml"]);
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("full.toml");
    std::fs::write(&p, &toml).unwrap();
    let o = bin()
        .args(["train", "--scene", s(&p), "--out", s(&t.path().join("r"))])
        .args([
            "--set",
            "train.iterations=2",
            "--set",
            "demo.cameras=3",
            "--set",
            "log.progress=false",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    let md = ok(&["config", "--markdown"]);
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md"))
            .unwrap();
    assert!(
        md == doc,
        "docs/config.md differs from `config --markdown`: regenerate it"
    );
}
