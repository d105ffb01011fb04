//! Golden tests on the shared real data, round trips and bad input.

use std::path::Path;

use super::colmap::{pose_of, to_cameras};
use super::colmap_bin::{write_cameras_bin, write_images_bin};
use super::colmap_text::{write_cameras_txt, write_images_txt};
use super::*;

fn snow_json(data: &std::path::Path) -> Vec<Camera> {
    read_inria_cameras(&data.join("snowmiku/cameras.json")).unwrap()
}

fn snow_text_dir(data: &std::path::Path) -> std::path::PathBuf {
    data.join("snowmiku/colmap_images_8/sparse/0")
}

fn images_of(cams: &[Camera]) -> Vec<ColmapImage> {
    let images = cams.iter().enumerate().map(|(i, c)| {
        let (qvec, tvec) = pose_of(c);
        ColmapImage {
            id: i as u32 + 1,
            qvec,
            tvec,
            camera_id: 1,
            name: format!("{}.png", c.name),
        }
    });
    images.collect()
}

#[test]
fn golden_inria_cameras_json() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let cams = snow_json(&data);
    assert_eq!(cams.len(), 97);
    let c = &cams[0];
    assert_eq!(
        (c.name.as_str(), c.width, c.height),
        ("20240212_003919", 3958, 2968)
    );
    assert_eq!(
        (c.fx, c.fy, c.cx, c.cy),
        (3276.9157, 3276.9157, 1979.0, 1484.0)
    );
    let centre =
        glam::DVec3::new(-2.0239410600999292, 1.5094239986550113, -3.171810618383385).as_vec3();
    assert!((c.centre() - centre).length() < 1e-5, "{}", c.centre());
    assert_eq!(image_stem("a/b\\x.tar.gz"), "x");
}

#[test]
fn golden_colmap_text_agrees_with_json_scaled_by_8() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let text = read_colmap(&snow_text_dir(&data)).unwrap();
    let json = scale_cameras(&snow_json(&data), ImageScale::Factor(8.0));
    assert_eq!(text.len(), 97);
    let c = &text[0];
    assert_eq!(
        (c.width, c.height, c.fx, c.cx, c.cy),
        (494, 371, 409.61447, 247.375, 185.5)
    );
    for (a, b) in text.iter().zip(&json) {
        assert_eq!(a.name, b.name);
        assert_eq!((a.width, a.height), (b.width, b.height));
        assert!((a.centre() - b.centre()).length() < 1e-4, "{}", a.name);
        assert!((a.rotation - b.rotation).abs_diff_eq(glam::Mat3::ZERO, 1e-5));
        assert!(
            (a.fx - b.fx).abs() < 1e-3 && (a.cx - b.cx).abs() < 1e-4 && (a.cy - b.cy).abs() < 1e-4
        );
    }
}

#[test]
fn golden_cameras_bin_and_distorted_models() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let cams = read_cameras_bin(&data.join("snowmiku/sparse/0/cameras.bin")).unwrap();
    assert_eq!(cams.len(), 1);
    let c = &cams[0];
    assert_eq!((c.model_name(), c.width, c.height), ("PINHOLE", 3958, 2968));
    assert_eq!(
        c.pinhole(Path::new("x")).unwrap(),
        (3276.9157129770406, 3276.9157129770406, 1979.0, 1484.0)
    );
    let e = read_colmap(&data.join("snowmiku/sparse/0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no images.bin"), "{e}");
    for f in [
        "snowmiku/distorted/sparse/0/cameras.bin",
        "fern_llff/sparse/0/cameras.bin",
    ] {
        let path = data.join(f);
        let cams = read_cameras_bin(&path).unwrap();
        assert_eq!(cams[0].model_name(), "SIMPLE_RADIAL");
        let imgs = images_of(&snow_json(&data)[..2]);
        let e = to_cameras(&path, &cams, &imgs).unwrap_err().to_string();
        assert!(
            e.contains("SIMPLE_RADIAL")
                && e.contains("undistort first")
                && e.contains("cameras.bin"),
            "{e}"
        );
    }
}

#[test]
fn binary_and_text_round_trips() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let text_dir = snow_text_dir(&data);
    let cams = read_cameras_txt(&text_dir.join("cameras.txt")).unwrap();
    let imgs = read_images_txt(&text_dir.join("images.txt")).unwrap();
    assert_eq!((cams.len(), imgs.len()), (1, 97));
    let dir = tempfile::tempdir().unwrap();
    write_cameras_bin(&dir.path().join("cameras.bin"), &cams).unwrap();
    write_images_bin(&dir.path().join("images.bin"), &imgs).unwrap();
    assert_eq!(
        read_images_bin(&dir.path().join("images.bin")).unwrap(),
        imgs
    );
    assert_eq!(
        load_cameras(dir.path()).unwrap(),
        read_colmap(&text_dir).unwrap()
    );
    let t = tempfile::tempdir().unwrap();
    write_cameras_txt(&t.path().join("cameras.txt"), &cams).unwrap();
    write_images_txt(&t.path().join("images.txt"), &imgs).unwrap();
    assert_eq!(
        read_cameras_txt(&t.path().join("cameras.txt")).unwrap(),
        cams
    );
    assert_eq!(read_images_txt(&t.path().join("images.txt")).unwrap(), imgs);
}

#[test]
fn bad_colmap_input() {
    let p = Path::new("m.bin");
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let good = std::fs::read(data.join("snowmiku/sparse/0/cameras.bin")).unwrap();
    let e = parse_cameras_bin(&good[..50], p).unwrap_err().to_string();
    assert!(e.contains("m.bin") && e.contains("truncated"), "{e}");
    let mut b = good.clone();
    b[12] = 99;
    assert!(
        parse_cameras_bin(&b, p)
            .unwrap_err()
            .to_string()
            .contains("unknown model id 99")
    );
    b = good.clone();
    b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(
        parse_cameras_bin(&b, p)
            .unwrap_err()
            .to_string()
            .contains("cannot fit")
    );
    b = good.clone();
    b[32..40].copy_from_slice(&f64::NAN.to_le_bytes());
    assert!(
        parse_cameras_bin(&b, p)
            .unwrap_err()
            .to_string()
            .contains("not finite")
    );
    let mut im = images_of(&snow_json(&data)[..1]);
    let dir = tempfile::tempdir().unwrap();
    let ip = dir.path().join("images.bin");
    write_images_bin(&ip, &im).unwrap();
    let bytes = std::fs::read(&ip).unwrap();
    let e = parse_images_bin(&bytes[..bytes.len() - 12], p)
        .unwrap_err()
        .to_string();
    assert!(e.contains("truncated"), "{e}");
    let mut nan = bytes.clone();
    nan[12..20].copy_from_slice(&f64::INFINITY.to_le_bytes());
    assert!(
        parse_images_bin(&nan, p)
            .unwrap_err()
            .to_string()
            .contains("not finite")
    );
    im[0].camera_id = 5;
    let cams = read_cameras_bin(&data.join("snowmiku/sparse/0/cameras.bin")).unwrap();
    assert!(
        to_cameras(p, &cams, &im)
            .unwrap_err()
            .to_string()
            .contains("camera 5")
    );
    let t = |s: &str| {
        parse_cameras_txt(s, Path::new("c.txt"))
            .unwrap_err()
            .to_string()
    };
    assert!(t("1 PINHOLE 10 10 1 1 5\n").contains("needs 4 parameters"));
    assert!(t("# c\n1 FISHEYE 10 10 1\n").contains("line 2"));
    assert!(t("1 PINHOLE 10 x 1 1 5 5\n").contains("height `x`"));
    assert!(t("1 PINHOLE 0 10 1 1 5 5\n").contains("empty"));
    assert!(t("1 PINHOLE 10 10 nan 1 5 5\n").contains("not finite"));
    let i = |s: &str| {
        parse_images_txt(s, Path::new("i.txt"))
            .unwrap_err()
            .to_string()
    };
    assert!(i("1 1 0 0 0 0 0 0 1\n").contains("line 1"));
    assert!(i("1 1 0 0 q 0 0 0 1 a.png\n\n").contains("`q`"));
}

#[test]
fn nerfstudio_transforms_match_inria_poses() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let json = snow_json(&data);
    let frames: Vec<serde_json::Value> = json[..5]
        .iter()
        .map(|c| {
            let r = c.rotation.transpose();
            let (x, y, z, t) = (r.x_axis, -r.y_axis, -r.z_axis, c.centre());
            let m = [[x.x, y.x, z.x, t.x], [x.y, y.y, z.y, t.y], [x.z, y.z, z.z, t.z], [0.0, 0.0, 0.0, 1.0]];
            serde_json::json!({"file_path": format!("images/{}.jpg", c.name), "transform_matrix": m})
        })
        .collect();
    let doc = serde_json::json!({"fl_x": 3276.9157, "fl_y": 3276.9157, "cx": 1979.0, "cy": 1484.0,
        "w": 3958, "h": 2968, "k1": 0.0, "camera_model": "OPENCV", "frames": frames});
    let dir = tempfile::tempdir().unwrap();
    let tp = dir.path().join("transforms.json");
    crate::io::write_bytes_atomic(&tp, doc.to_string().as_bytes()).unwrap();
    let cams = load_cameras(dir.path()).unwrap();
    for (a, b) in cams.iter().zip(&json) {
        assert_eq!(
            (&a.name, a.width, a.fx, a.cx),
            (&b.name, b.width, b.fx, b.cx)
        );
        assert!((a.centre() - b.centre()).length() < 1e-5);
        assert!((a.rotation - b.rotation).abs_diff_eq(glam::Mat3::ZERO, 1e-5));
    }
    let bad = |v: serde_json::Value| {
        parse_transforms(v.to_string().as_bytes(), &tp)
            .unwrap_err()
            .to_string()
    };
    let mut d = doc.clone();
    d["k1"] = 0.1.into();
    assert!(bad(d).contains("undistort first"));
    let mut d = doc.clone();
    d.as_object_mut().unwrap().remove("fl_x");
    assert!(bad(d).contains("camera_angle_x"));
    let mut d = doc.clone();
    d["frames"][1]["transform_matrix"] = serde_json::json!([[1, 0], [0, 1]]);
    assert!(bad(d).contains("frame 1"));
    let mut d = doc.clone();
    d["frames"][2]["file_path"] = d["frames"][0]["file_path"].clone();
    assert!(bad(d).contains("two cameras"));
    assert!(bad(serde_json::json!({"a": 1})).contains("frames"));
}

#[test]
fn inria_json_errors_and_gsplat_npz() {
    let p = Path::new("cameras.json");
    let e = parse_inria_cameras(b"[{\"img_name\": \"a\"}]", p)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cameras.json") && e.contains("missing field"),
        "{e}"
    );
    let bent = br#"[{"img_name":"a","width":4,"height":4,"position":[0,0,0],"rotation":[[2,0,0],[0,1,0],[0,0,1]],"fx":1,"fy":1}]"#;
    assert!(
        parse_inria_cameras(bent, p)
            .unwrap_err()
            .to_string()
            .contains("orthonormal")
    );
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let cams = load_cameras(&data.join("test_garden.npz")).unwrap();
    assert_eq!(cams.len(), 3);
    assert_eq!(
        (cams[0].width, cams[0].height, cams[1].name.as_str()),
        (648, 420, "0001")
    );
    assert!(
        cams[0].fx > 100.0 && (cams[0].cx - 324.0).abs() < 20.0,
        "{:?}",
        cams[0]
    );
}

#[test]
fn files_without_cameras_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cameras.json");
    std::fs::write(&json, "[]").unwrap();
    let tf = dir.path().join("transforms.json");
    std::fs::write(
        &tf,
        r#"{"fl_x": 100, "fl_y": 100, "cx": 50, "cy": 40, "w": 100, "h": 80, "frames": []}"#,
    )
    .unwrap();
    for p in [&json, &tf] {
        let e = load_cameras(p).unwrap_err().to_string();
        assert!(
            e.contains(&p.display().to_string()) && e.contains("no cameras"),
            "{e}"
        );
    }
}
