//! The valid inputs every case starts from: a tiny splat, its synth scene (orbit
//! cameras, LangSplat npy folder, imported dataset, scene file), a trained run with a
//! checkpoint, text embeddings and a LERF label folder, and the same cameras as a
//! COLMAP model (text and binary) and a transforms.json.

use std::path::{Path, PathBuf};

use crate::common::cli::{known_objects, label, ok, s, synth_scene, write_text};

/// The valid inputs (kept alive with their temporary folder).
pub struct Fixture {
    pub _synth: crate::common::cli::Synth,
    pub _tmp: tempfile::TempDir,
    /// Scratch folder for the cases.
    pub root: PathBuf,
    /// The splat.
    pub ply: PathBuf,
    /// synth's folder: cameras.json, language_features/, dataset/, scene.toml.
    pub scene_dir: PathBuf,
    /// A finished run of 6 steps with checkpoints after steps 3 and 6.
    pub run: PathBuf,
    /// Text embeddings (`.npy` + `.txt`).
    pub text: PathBuf,
    /// A label folder for frame_00003.
    pub labels: PathBuf,
    /// COLMAP text and binary models, and a transforms.json, of the same cameras.
    pub colmap_txt: PathBuf,
    pub colmap_bin: PathBuf,
    pub transforms: PathBuf,
}

impl Fixture {
    /// A fresh folder for one case.
    pub fn case_dir(&self, name: &str) -> PathBuf {
        let d = self.root.join("cases").join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The scene file with `key = value` lines of `[scene]` replaced.
    pub fn scene_with(&self, dir: &Path, splats: &Path, cameras: &Path, dataset: &Path) -> PathBuf {
        let p = dir.join("scene.toml");
        std::fs::write(
            &p,
            format!(
                "[scene]\nsplats = {:?}\ncameras = {:?}\ndataset = {:?}\nlevel = 1\n",
                splats.display().to_string(),
                cameras.display().to_string(),
                dataset.display().to_string()
            ),
        )
        .unwrap();
        p
    }
}

pub fn build() -> Fixture {
    let sc = synth_scene(3, 3, 3, "dataset");
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let scene_dir = sc.root.canonicalize().unwrap();
    let ply = scene_dir.parent().unwrap().join("tiny.ply");
    let run = root.join("run");
    ok(&[
        "train",
        "--scene",
        s(&sc.scene),
        "--out",
        s(&run),
        "--set",
        "train.iterations=6",
        "--set",
        "log.checkpoint_every=3",
        "--set",
        "log.progress=false",
    ]);
    let text = write_text(&scene_dir, 3);
    let (objects, size) = known_objects(&scene_dir);
    let labels = label(&scene_dir, "frame_00003", size, &objects.join(", "));
    let cams = lsplat_data::cameras::load_cameras(&scene_dir.join("cameras.json")).unwrap();
    let (colmap_txt, colmap_bin) = (root.join("colmap_txt"), root.join("colmap_bin"));
    write_colmap(&cams, &colmap_txt, &colmap_bin);
    let transforms = root.join("transforms.json");
    std::fs::write(&transforms, transforms_json(&cams).to_string()).unwrap();
    Fixture {
        _synth: sc,
        _tmp: tmp,
        root,
        ply,
        scene_dir,
        run,
        text,
        labels,
        colmap_txt,
        colmap_bin,
        transforms,
    }
}

fn write_colmap(cams: &[lsplat_core::Camera], txt: &Path, bin: &Path) {
    use lsplat_data::cameras::colmap::{ColmapCamera, ColmapImage, pose_of};
    let mut cc = Vec::new();
    let mut ii = Vec::new();
    for (i, c) in cams.iter().enumerate() {
        cc.push(ColmapCamera {
            id: i as u32 + 1,
            model: 1,
            width: c.width,
            height: c.height,
            params: vec![c.fx as f64, c.fy as f64, c.cx as f64, c.cy as f64],
        });
        let (qvec, tvec) = pose_of(c);
        ii.push(ColmapImage {
            id: i as u32 + 1,
            qvec,
            tvec,
            camera_id: i as u32 + 1,
            name: format!("{}.jpg", c.name),
        });
    }
    for d in [txt, bin] {
        std::fs::create_dir_all(d).unwrap();
    }
    use lsplat_data::cameras::{colmap_bin as b, colmap_text as t};
    t::write_cameras_txt(&txt.join("cameras.txt"), &cc).unwrap();
    t::write_images_txt(&txt.join("images.txt"), &ii).unwrap();
    b::write_cameras_bin(&bin.join("cameras.bin"), &cc).unwrap();
    b::write_images_bin(&bin.join("images.bin"), &ii).unwrap();
    for c in cams {
        assert_eq!(
            lsplat_data::cameras::load_cameras(txt)
                .unwrap()
                .iter()
                .filter(|x| x.name == c.name)
                .count(),
            1
        );
    }
}

/// nerfstudio's layout of `cams`: camera-to-world in OpenGL axes (y and z flipped).
fn transforms_json(cams: &[lsplat_core::Camera]) -> serde_json::Value {
    let frames: Vec<serde_json::Value> = cams
        .iter()
        .map(|c| {
            let r = c.rotation.transpose(); // camera-to-world, OpenCV axes
            let p = c.centre();
            let m: Vec<Vec<f32>> = (0..3)
                .map(|i| vec![r.x_axis[i], -r.y_axis[i], -r.z_axis[i], p[i]])
                .chain([vec![0.0, 0.0, 0.0, 1.0]])
                .collect();
            serde_json::json!({"file_path": format!("images/{}.png", c.name), "transform_matrix": m})
        })
        .collect();
    let c = &cams[0];
    serde_json::json!({"fl_x": c.fx, "fl_y": c.fy, "cx": c.cx, "cy": c.cy, "w": c.width, "h": c.height, "frames": frames})
}
