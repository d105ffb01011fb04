//! A LangSplat user's folders, used as they are (issue 29, points 12 and 13):
//! `train -s data/<scene> -m output/<scene> --feature_level L`, the dataset import
//! cached inside the model folder, runs in `output/<scene>_<L>`, and `render --layout
//! langsplat` writing what LangSplat's eval reads.
//!
//! The fixture is the real snowmiku capture laid out as LangSplat expects, built at
//! test time from the shared data (nothing is copied into the repository): 9 of its
//! 97 cameras (COLMAP text model of `images_8`), their images, a splat made from its
//! 25 784 sparse points, and `language_features/` made by `synth` on that splat and
//! those cameras.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::cli::{fails, ok, s};
use common::python;
use lsplat_core::Config;
use lsplat_data::npy::read_npy;

/// Runs the binary in `cwd` (so the paths can be LangSplat's relative ones).
fn in_dir(cwd: &Path, args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_lsplat-engine"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    o
}

fn ok_in(cwd: &Path, args: &[&str]) -> String {
    let o = in_dir(cwd, args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `root/data/snowmiku` (source) and `root/output/snowmiku` (model).
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// The cameras' names, sorted.
    names: Vec<String>,
}

/// Gaussians at the COLMAP points: isotropic, sized by the points' spacing.
fn splat_from_points(points3d: &Path) -> lsplat_data::ply::SplatPly {
    let text = std::fs::read_to_string(points3d).unwrap();
    let mut means = Vec::new();
    let mut colours = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let v: Vec<f32> = line
            .split_whitespace()
            .take(7)
            .map(|x| x.parse().unwrap())
            .collect();
        means.push([v[1], v[2], v[3]]);
        colours.push([v[4], v[5], v[6]]);
    }
    // Median distance to the nearest other point, over a sample of 200 points.
    let mut nn: Vec<f32> = (0..200)
        .map(|i| {
            let p = glam::Vec3::from(means[i * means.len() / 200]);
            means
                .iter()
                .map(|q| (glam::Vec3::from(*q) - p).length())
                .filter(|d| *d > 0.0)
                .fold(f32::MAX, f32::min)
        })
        .collect();
    nn.sort_by(f32::total_cmp);
    let scale = (2.0 * nn[100]).ln();
    let n = means.len();
    let gaussians = lsplat_core::Gaussians {
        means,
        log_scales: vec![[scale; 3]; n],
        rotations: vec![[1.0, 0.0, 0.0, 0.0]; n],
        opacity_logits: vec![3.0; n],
    };
    lsplat_data::ply::SplatPly {
        gaussians,
        sh_degree: 0,
        sh_dc: colours
            .iter()
            .map(|c| c.map(|v| (v / 255.0 - 0.5) / 0.282_094_8))
            .collect(),
        sh_rest: Vec::new(),
        extra_names: Vec::new(),
        extra: Vec::new(),
    }
}

fn fixture() -> Option<Fixture> {
    let data = lsplat_data::testdata::test_data()?;
    let sm = data.join("snowmiku");
    let colmap = sm.join("colmap_images_8/sparse/0");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let source = root.join("data/snowmiku");
    let sparse = source.join("sparse/0");
    std::fs::create_dir_all(&sparse).unwrap();
    std::fs::create_dir_all(source.join("images")).unwrap();
    for f in ["cameras.txt", "points3D.txt"] {
        std::os::unix::fs::symlink(colmap.join(f), sparse.join(f)).unwrap();
    }
    // Every 12th image of the model (two lines each: the pose, then its empty
    // POINTS2D line).
    let text = std::fs::read_to_string(colmap.join("images.txt")).unwrap();
    let mut kept = String::new();
    let mut names = Vec::new();
    let poses = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    for (k, line) in poses.enumerate() {
        if k % 12 == 0 {
            let name = line.split_whitespace().last().unwrap().to_string();
            std::os::unix::fs::symlink(
                sm.join("images_8").join(&name),
                source.join("images").join(&name),
            )
            .unwrap();
            names.push(name.trim_end_matches(".png").to_string());
            kept += &format!("{line}\n\n");
        }
    }
    std::fs::write(sparse.join("images.txt"), kept).unwrap();
    names.sort();
    // The model folder: the splat at iteration 7000; iteration_500 holds a file that
    // is not a PLY (taking it — "500" > "7000" by name — would fail); cfg_args as the
    // 3DGS trainer writes it.
    let model = root.join("output/snowmiku");
    let it = model.join("point_cloud/iteration_7000");
    std::fs::create_dir_all(&it).unwrap();
    let ply = it.join("point_cloud.ply");
    lsplat_data::ply::write_ply(&ply, &splat_from_points(&colmap.join("points3D.txt"))).unwrap();
    let early = model.join("point_cloud/iteration_500");
    std::fs::create_dir_all(&early).unwrap();
    std::fs::write(early.join("point_cloud.ply"), b"not a ply").unwrap();
    std::fs::write(
        model.join("cfg_args"),
        format!(
            "Namespace(data_device='cuda', eval=False, images='images', model_path='output/snowmiku', resolution=-1, sh_degree=3, source_path='{}', white_background=False)",
            source.display()
        ),
    )
    .unwrap();
    // LangSplat's language features (3-D codes here), made by synth on these cameras.
    let said = ok(&[
        "synth",
        "--splats",
        s(&ply),
        "--cameras",
        s(&sparse),
        "--objects",
        "4",
        "--out",
        s(&root.join("synth")),
    ]);
    eprintln!("{said}");
    std::fs::rename(
        root.join("synth/language_features"),
        source.join("language_features"),
    )
    .unwrap();
    Some(Fixture {
        _dir: dir,
        root,
        names,
    })
}

fn config_of(run: &Path) -> Config {
    Config::load(&run.join("config.toml")).unwrap()
}

/// The cached imports in the model folder.
fn caches(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("output/snowmiku/lsplat_cache"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

#[test]
fn langsplat_folders_train_solve_and_render_as_they_are() {
    let Some(fx) = fixture() else { return };
    let root = &fx.root;
    // train, exactly as LangSplat's README has it (relative paths).
    let said = ok_in(
        root,
        &[
            "train",
            "-s",
            "data/snowmiku",
            "-m",
            "output/snowmiku",
            "--feature_level",
            "1",
            "--set",
            "train.iterations=30",
            "--set",
            "log.progress=false",
        ],
    );
    assert!(
        said.contains("scene from LangSplat folders")
            && said.contains("iteration_7000/point_cloud.ply")
            && said.contains("imported now"),
        "{said}"
    );
    let run1 = root.join("output/snowmiku_1");
    assert!(
        run1.join("summary.json").is_file(),
        "the run is MODEL_<level>"
    );
    let cfg = config_of(&run1);
    let splats = cfg.scene.splats.clone().unwrap();
    assert!(splats.ends_with("output/snowmiku/point_cloud/iteration_7000/point_cloud.ply"));
    assert!(
        cfg.scene
            .cameras
            .clone()
            .unwrap()
            .ends_with("data/snowmiku/sparse/0")
    );
    let dataset = cfg.scene.dataset.clone().unwrap();
    assert_eq!(caches(root), vec![dataset.clone()]);
    assert!(
        dataset
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("language_features-")
    );
    // scene.toml: the resolved scene, a scene file train --scene reads.
    let scene = Config::load(&run1.join("scene.toml")).unwrap();
    assert_eq!(scene.scene, cfg.scene);

    // solve with -m alone (the source from cfg_args): the import is reused.
    let said = ok_in(
        root,
        &[
            "solve",
            "-m",
            "output/snowmiku",
            "--feature_level",
            "2",
            "--method",
            "average",
            "--set",
            "log.progress=false",
        ],
    );
    assert!(said.contains("cached, reused"), "{said}");
    let run2 = root.join("output/snowmiku_2");
    assert_eq!(config_of(&run2).scene.dataset.unwrap(), dataset);
    assert_eq!(config_of(&run2).scene.level, 2);

    // A changed feature file is a new import; the stale one is removed.
    let f = root.join(format!(
        "data/snowmiku/language_features/{}_f.npy",
        fx.names[3]
    ));
    let bytes = std::fs::read(&f).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&f, &bytes).unwrap();
    let said = ok_in(
        root,
        &[
            "train",
            "-s",
            "data/snowmiku",
            "-m",
            "output/snowmiku",
            "--feature_level",
            "3",
            "--set",
            "train.iterations=5",
            "--set",
            "log.eval=false",
            "--set",
            "log.progress=false",
        ],
    );
    assert!(said.contains("imported now"), "{said}");
    let fresh = config_of(&root.join("output/snowmiku_3"))
        .scene
        .dataset
        .unwrap();
    assert_ne!(fresh, dataset);
    assert_eq!(caches(root), vec![fresh]);

    // A finished run in MODEL_<level> is refused, and --force overwrites it.
    let again = [
        "train",
        "-s",
        "data/snowmiku",
        "-m",
        "output/snowmiku",
        "--feature_level",
        "1",
        "--set",
        "train.iterations=30",
        "--set",
        "log.progress=false",
    ];
    let o = in_dir(root, &again);
    assert!(!o.status.success(), "a finished run is not overwritten");
    let mut forced = again.to_vec();
    forced.push("--force");
    ok_in(root, &forced);

    // render in LangSplat's layout: <feat_dir>/<scene>_<level>/train/ours_None/
    // renders_npy/<index>.npy, index = the camera's place in name order; the arrays
    // are our own render's.
    let said = ok_in(
        root,
        &[
            "render",
            "-m",
            "output/snowmiku",
            "--feature_level",
            "1",
            "--layout",
            "langsplat",
        ],
    );
    assert!(said.contains("rendered 9 cameras"), "{said}");
    let npy_dir = run1.join("train/ours_None/renders_npy");
    let mut files: Vec<String> = std::fs::read_dir(&npy_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let want: Vec<String> = (0..9).map(|i| format!("{i:05}.npy")).collect();
    assert_eq!(files, want);
    assert!(run1.join("train/ours_None/renders/00005.png").is_file());
    let ours = root.join("ours");
    ok(&[
        "render",
        "--run",
        s(&run1),
        "--cameras",
        &fx.names[5],
        "--out",
        s(&ours),
    ]);
    let a = read_npy(&npy_dir.join("00005.npy")).unwrap();
    let b = read_npy(&ours.join(format!("{}.npy", fx.names[5]))).unwrap();
    assert_eq!(a.shape, vec![371, 494, 3]);
    assert_eq!((a.shape, a.data), (b.shape, b.data));
    // LangSplat's eval/evaluate_iou_loc.py reads them so: the level folders under
    // --feat_dir, files sorted by their number, frame k → file k − 1.
    if let Some(py) = python() {
        let script = r#"
import glob, os, sys, numpy as np
feat_dir, name = sys.argv[1], sys.argv[2]
d = os.path.join(feat_dir, name + "_1", "train/ours_None/renders_npy")
paths = sorted(glob.glob(os.path.join(d, "*.npy")), key=lambda f: int(os.path.basename(f).split(".npy")[0]))
a = np.load(paths[5])
print(len(paths), a.shape, a.dtype)
"#;
        let o = Command::new(&py)
            .args(["-c", script, s(&root.join("output")), "snowmiku"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "9 (371, 494, 3) float32"
        );
    }
}

/// A model folder with only PyTorch checkpoints is refused, saying to export the PLY,
/// before anything is written; so is a source without language features.
#[test]
fn langsplat_folders_refuse_checkpoints_and_missing_features() {
    let Some(fx) = fixture() else { return };
    let root = &fx.root;
    let ckpt = root.join("output/ckpt_only");
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::write(ckpt.join("chkpnt30000.pth"), b"torch").unwrap();
    let o = in_dir(
        root,
        &[
            "train",
            "-s",
            "data/snowmiku",
            "-m",
            "output/ckpt_only",
            "--feature_level",
            "1",
        ],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        e.contains("chkpnt30000.pth") && e.contains("point_cloud.ply") && e.contains("export"),
        "{e}"
    );
    assert!(!root.join("output/ckpt_only_1").exists());
    let e = fails(&[
        "train",
        "-s",
        s(&root.join("data/snowmiku")),
        "-m",
        s(&root.join("output/snowmiku")),
        "--language_features_name",
        "language_features_dim3",
    ]);
    assert!(e.contains("language_features_dim3"), "{e}");
    assert!(!root.join("output/snowmiku_1").exists());
    let e = fails(&["train", "-s", s(&root.join("data/snowmiku"))]);
    assert!(e.contains("-m MODEL"), "{e}");
}
