//! Data-parallel training under a real MPI launcher (`mpirun -n 2`): two ranks with
//! batch 1 compute bit for bit what one rank with batch 2 computes, rank 0 alone
//! writes, a resumed job continues exactly, ranks that disagree stop at once, and a
//! rank that dies or hangs ends every rank with an error naming it.
//!
//! Needs `mpirun` and a binary built with `--features mpi`; skipped otherwise, unless
//! LSPLAT_REQUIRE_MPI=1 (CI sets it).

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lsplat_data::run;

const BIN: &str = env!("CARGO_BIN_EXE_lsplat-engine");

/// The demo settings of every run here (`extra`: more `--set` values).
fn sets(extra: &[&str]) -> Vec<String> {
    [
        "demo.gaussians=1500",
        "demo.cameras=8",
        "demo.width=128",
        "demo.height=96",
        "log.eval=false",
        "log.every=25",
        "log.progress=false",
        "device.threads=1",
    ]
    .iter()
    .chain(extra)
    .flat_map(|s| ["--set".to_string(), s.to_string()])
    .collect()
}

/// Whether the simt runtime can compile kernels here (a C++ compiler); required
/// when LSPLAT_REQUIRE_SIMT=1.
fn simt_available() -> bool {
    let found = ["g++", "clang++"]
        .iter()
        .any(|c| Command::new(c).arg("--version").output().is_ok());
    let required = std::env::var("LSPLAT_REQUIRE_SIMT").is_ok_and(|v| v == "1");
    assert!(
        found || !required,
        "LSPLAT_REQUIRE_SIMT=1 but no C++ compiler"
    );
    if !found {
        eprintln!("SKIPPED the simt case: no C++ compiler");
    }
    found
}

/// One MPI job at a time: the jobs of parallel tests would share (and oversubscribe)
/// the cores, and their timing-dependent checks would be at each other's mercy.
static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_job() -> std::sync::MutexGuard<'static, ()> {
    ONE_JOB.lock().unwrap_or_else(|e| e.into_inner())
}

/// `mpirun -n ranks lsplat-engine train …`, or None (skip) without MPI.
fn mpirun(ranks: usize) -> Option<Command> {
    let required = std::env::var("LSPLAT_REQUIRE_MPI").is_ok_and(|v| v == "1");
    let info = Command::new(BIN).arg("info").output().unwrap();
    let compiled = String::from_utf8_lossy(&info.stdout).contains("MPI compiled in");
    let launcher = Command::new("mpirun").arg("--version").output().is_ok();
    if !(compiled && launcher) {
        assert!(
            !required,
            "LSPLAT_REQUIRE_MPI=1 but mpi compiled in: {compiled}, mpirun found: {launcher}"
        );
        eprintln!(
            "SKIPPED the MPI tests: needs mpirun and a binary built with --features mpi (set LSPLAT_REQUIRE_MPI=1 to require them)"
        );
        return None;
    }
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe", "-n"])
        .arg(ranks.to_string())
        // No stdin for the ranks, and no waiting for one.
        .stdin(Stdio::null());
    Some(c)
}

fn train_one(out: &Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .arg("train")
        .args(sets(extra))
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The stderr of a job that must fail (without a panic on any rank).
fn fails(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The `(step, loss)` lines of a run's metrics file.
fn losses(dir: &Path) -> Vec<(u64, u32)> {
    run::read_losses(&dir.join(run::METRICS_FILE))
        .unwrap()
        .into_iter()
        .map(|(s, l)| (s, l.to_bits()))
        .collect()
}

/// Files under `dir` (relative paths), sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn two_ranks_with_batch_1_equal_one_rank_with_batch_2() {
    let _job = one_job();
    let Some(mut mpi) = mpirun(2) else { return };
    let tmp = tempfile::tempdir().unwrap();
    // The cached operator's transposed product adds each camera's sum per Gaussian to
    // the gradient, so the two ranks' sum is the batch's sum bit for bit (the uncached
    // rasterizer adds per intersection: there the two agree to rounding only).
    let cases = [
        ("true", "cpu", "120"),
        ("false", "cpu", "120"),
        ("true", "simt", "40"),
    ];
    for (normalize, backend, iterations) in cases {
        if backend == "simt" && !simt_available() {
            continue;
        }
        let extra = [
            &*format!("train.iterations={iterations}"),
            &*format!("train.normalize={normalize}"),
            &*format!("device.backend={backend}"),
            "log.checkpoint_every=50",
        ];
        let case = format!("{backend}-{normalize}");
        let one = tmp.path().join(format!("one-{case}"));
        let two = tmp.path().join(format!("two-{case}"));
        let mut batch2 = extra.to_vec();
        batch2.push("train.batch_size=2");
        ok(&train_one(&one, &batch2));
        let mut batch1 = extra.to_vec();
        batch1.push("train.batch_size=1");
        // Rank 0 alone writes: run in an empty working directory and look at it after.
        let cwd = tmp.path().join(format!("cwd-{case}"));
        std::fs::create_dir(&cwd).unwrap();
        let o = mpi
            .current_dir(&cwd)
            .arg(BIN)
            .arg("train")
            .args(sets(&batch1))
            .arg("--out")
            .arg(&two)
            .output()
            .unwrap();
        let stdout = ok(&o);
        assert!(stdout.contains("2 ranks"), "{stdout}");
        assert_eq!(
            stdout.matches("run directory:").count(),
            1,
            "only rank 0 reports: {stdout}"
        );
        assert!(files(&cwd).is_empty(), "a rank wrote {:?}", files(&cwd));
        assert_eq!(files(&one), files(&two));
        // Bit for bit: the gradients of the two cameras are summed in the same order.
        assert!(
            bytes(&one.join("features.npy")) == bytes(&two.join("features.npy")),
            "{case}: the features differ"
        );
        assert_eq!(losses(&one), losses(&two), "{case}");
        let steps: u64 = iterations.parse().unwrap();
        assert_eq!(losses(&two).len() as u64, steps);
        let ckpt = |d: &Path| {
            let name = run::checkpoint_name(steps);
            run::Checkpoint::read(&d.join("checkpoints").join(name)).unwrap()
        };
        let (a, b) = (ckpt(&one), ckpt(&two));
        assert!(
            (a.params, a.adam_m, a.adam_v) == (b.params, b.adam_m, b.adam_v),
            "{case}: the checkpoints differ"
        );
        // The sampler position counts this rank's draws, half of batch 2's.
        assert_eq!((a.sampler_position, b.sampler_position), (2 * steps, steps));
        mpi = mpirun(2).unwrap();
    }
}

#[test]
fn a_resumed_job_continues_bit_for_bit() {
    let _job = one_job();
    let Some(mut mpi) = mpirun(2) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    let parts = tmp.path().join("parts");
    let run_job = |mpi: &mut Command, args: Vec<String>| {
        ok(&mpi.arg(BIN).arg("train").args(args).output().unwrap());
    };
    let base = ["train.batch_size=1", "log.checkpoint_every=40"];
    let mut all = sets(&base);
    all.extend([
        "--set".into(),
        "train.iterations=100".into(),
        "--out".into(),
    ]);
    all.push(whole.display().to_string());
    run_job(&mut mpi, all);
    let mut first = sets(&base);
    first.extend(["--set".into(), "train.iterations=60".into(), "--out".into()]);
    first.push(parts.display().to_string());
    run_job(&mut mpirun(2).unwrap(), first);
    let resume = vec![
        "--resume".to_string(),
        parts.display().to_string(),
        "--set".into(),
        "train.iterations=100".into(),
    ];
    run_job(&mut mpirun(2).unwrap(), resume);
    assert_eq!(
        bytes(&whole.join("features.npy")),
        bytes(&parts.join("features.npy"))
    );
    assert_eq!(losses(&whole), losses(&parts));
}

#[test]
fn ranks_that_disagree_stop_at_once() {
    let _job = one_job();
    let Some(mut mpi) = mpirun(1) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    // MPMD: rank 0 and rank 1 get different settings.
    let t0 = Instant::now();
    let o = mpi
        .arg(BIN)
        .arg("train")
        .args(sets(&["train.lr=0.002"]))
        .arg("--out")
        .arg(&out)
        .args([":", "-n", "1", BIN, "train"])
        .args(sets(&["train.lr=0.003"]))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = fails(&o);
    assert!(
        err.contains("rank 1 differs from rank 0: the configuration"),
        "{err}"
    );
    assert!(t0.elapsed() < Duration::from_secs(60));
    assert!(!out.exists(), "nothing is written before the ranks agree");
}

/// Starts a 2-rank job, waits until it has trained a little, does `act` to rank 1's
/// process, and returns the job's output and how long it took to end after `act`.
fn disturb_rank_1(act: &str, extra: &[&str]) -> Option<(Output, Duration)> {
    let mut mpi = mpirun(2)?;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let mut args = vec!["train.iterations=1000000", "train.batch_size=1"];
    args.extend(extra);
    let child = mpi
        .arg(BIN)
        .arg("train")
        .args(sets(&args))
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first logging window (both ranks are in the step loop).
    let t0 = Instant::now();
    while losses_so_far(&out) < 50 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the job never trained"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = rank_pid(1, &out).expect("rank 1's process");
    let kill = Command::new("kill").args([act, &pid.to_string()]).status();
    assert!(kill.unwrap().success());
    let t1 = Instant::now();
    let o = child.wait_with_output().unwrap();
    Some((o, t1.elapsed()))
}

fn losses_so_far(out: &Path) -> usize {
    std::fs::read_to_string(out.join(run::METRICS_FILE)).map_or(0, |s| s.lines().count())
}

/// The pid of the lsplat-engine process that mpirun started as `rank` of the job
/// writing to `out` (read from /proc: its command line and OMPI_COMM_WORLD_RANK).
fn rank_pid(rank: usize, out: &Path) -> Option<u32> {
    let me = std::process::id();
    for e in std::fs::read_dir("/proc").ok()? {
        let Ok(pid) = e.ok()?.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            continue;
        };
        if exe != Path::new(BIN) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let out = out.as_os_str().as_encoded_bytes();
        if !cmdline.split(|&b| b == 0).any(|a| a == out) {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let want = format!("OMPI_COMM_WORLD_RANK={rank}");
        if env.split(|&b| b == 0).any(|kv| kv == want.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

#[test]
fn a_killed_rank_ends_every_rank() {
    let _job = one_job();
    let Some((o, took)) = disturb_rank_1("-KILL", &[]) else {
        return;
    };
    let err = fails(&o);
    // The launcher names the rank and the signal.
    assert!(err.contains("rank 1"), "{err}");
    assert!(err.contains("signal 9") || err.contains("Killed"), "{err}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
    let _ = o.status.signal();
}

#[test]
fn a_hung_rank_ends_every_rank_after_the_timeout() {
    let _job = one_job();
    // SIGSTOP freezes rank 1: rank 0 waits in a collective until dist.timeout_s.
    let Some((o, took)) = disturb_rank_1("-STOP", &["dist.timeout_s=3"]) else {
        return;
    };
    let err = fails(&o);
    assert!(err.contains("error: rank 0:"), "{err}");
    assert!(err.contains("waited more than 3.0 s"), "{err}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

#[test]
fn solvers_refuse_several_ranks() {
    let _job = one_job();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    for args in [
        vec!["solve", "--method", "average"],
        vec!["train", "--set", "train.solver=lsq"],
    ] {
        let Some(mut mpi) = mpirun(2) else { return };
        let o = mpi
            .arg(BIN)
            .args(&args)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = fails(&o);
        assert!(err.contains("runs on one process"), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: nothing is written");
    }
}
