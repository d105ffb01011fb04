//! Tests of the PLY reader and writer, on real files and on bad input.

use super::*;

fn sh3(data: &std::path::Path) -> std::path::PathBuf {
    data.join("splats/inria_iter7000_n9080_sh3.ply")
}

fn err(bytes: &[u8]) -> String {
    parse_ply(bytes, Path::new("bad.ply"))
        .unwrap_err()
        .to_string()
}

#[test]
fn golden_inria_sh3() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let p = read_ply(&sh3(&data)).unwrap();
    let g = &p.gaussians;
    assert_eq!(g.len(), 9080);
    assert_eq!(p.sh_degree, 3);
    assert_eq!(p.rest_len(), 45);
    assert_eq!(p.sh_rest.len(), 9080 * 45);
    assert!(p.extra_names.is_empty());
    assert_eq!(g.means[0], [7.319243, -16.327652, 19.468027]);
    assert_eq!(p.sh_dc[0], [-0.93177545, 0.5264074, -0.42872968]);
    assert_eq!(g.opacity_logits[0], -4.59512);
    assert_eq!(g.log_scales[0], [-3.5668294, -3.593499, -3.5698576]);
    let q = [0.9921094f32, -0.008831307, 0.006490434, -0.006224418];
    let nq = q.iter().map(|v| v * v).sum::<f32>().sqrt();
    for (a, b) in g.rotations[0].iter().zip(q) {
        assert!((a - b / nq).abs() < 1e-6);
    }
    assert_eq!(g.means[1], [-11.832534, -12.888556, 17.034174]);
    for q in &g.rotations {
        assert!((q.iter().map(|v| v * v).sum::<f32>() - 1.0).abs() < 1e-5);
    }
    let nonzero = p.sh_rest.iter().filter(|v| **v != 0.0).count() as f64 / p.sh_rest.len() as f64;
    assert!((0.8..0.95).contains(&nonzero), "{nonzero}");
    g.validate().unwrap();
}

#[test]
fn golden_playcanvas_sh0() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    for (file, n) in [
        ("playcanvas_biker.inria_sh0.ply", 152_746),
        ("playcanvas_guitar.inria_sh0.ply", 90_854),
    ] {
        let p = read_ply(&data.join(format!("splats/{file}"))).unwrap();
        assert_eq!(
            (p.gaussians.len(), p.sh_degree, p.sh_rest.len()),
            (n, 0, 0),
            "{file}"
        );
        for q in &p.gaussians.rotations {
            assert!((q.iter().map(|v| v * v).sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }
    let (lo, hi) = read_ply(&data.join("splats/playcanvas_guitar.inria_sh0.ply"))
        .unwrap()
        .gaussians
        .bounds()
        .unwrap();
    assert!(
        lo[1] > -4.4 && lo[1] < -4.1 && hi[0] > 0.7 && hi[0] < 0.9,
        "{lo:?} {hi:?}"
    );
}

#[test]
fn compressed_ply_is_named() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let e = read_ply(&data.join("splats/playcanvas_guitar.compressed.ply"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("compressed") && e.contains("guitar"), "{e}");
}

#[test]
fn round_trip_with_lang_features() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let mut p = read_ply(&sh3(&data)).unwrap();
    let n = p.gaussians.len();
    p.extra_names = lang_property_names(3);
    p.extra = (0..n * 3).map(|i| i as f32 * 0.25).collect();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.ply");
    write_ply(&out, &p).unwrap();
    let q = read_ply(&out).unwrap();
    assert_eq!(q.extra_names, ["f_lang_0", "f_lang_1", "f_lang_2"]);
    assert_eq!(q.extra_column("f_lang_2").unwrap()[1], 5.0 * 0.25);
    assert_eq!(
        (
            q.sh_dc == p.sh_dc,
            q.sh_rest == p.sh_rest,
            q.extra == p.extra
        ),
        (true, true, true)
    );
    assert_eq!(q.gaussians.means, p.gaussians.means);
    assert_eq!(q.gaussians.log_scales, p.gaussians.log_scales);
    assert_eq!(q.gaussians.opacity_logits, p.gaussians.opacity_logits);
    for (a, b) in q.gaussians.rotations.iter().zip(&p.gaussians.rotations) {
        assert!(a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6));
    }
    // SH degree 0 without extras also round-trips.
    p.sh_degree = 0;
    p.sh_rest.clear();
    p.extra_names.clear();
    p.extra.clear();
    write_ply(&out, &p).unwrap();
    assert_eq!(read_ply(&out).unwrap().sh_dc, p.sh_dc);
}

#[test]
fn writer_rejects_inconsistent_input() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let mut p = read_ply(&data.join("splats/inria_iter7000_n9080_sh3.ply")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.ply");
    p.extra_names = vec!["f lang".into()];
    p.extra = vec![0.0; p.gaussians.len()];
    assert!(
        write_ply(&out, &p)
            .unwrap_err()
            .to_string()
            .contains("blanks")
    );
    p.extra_names = vec!["opacity".into()];
    assert!(write_ply(&out, &p).is_err());
    p.extra_names.clear();
    assert!(
        write_ply(&out, &p)
            .unwrap_err()
            .to_string()
            .contains("do not match")
    );
    p.extra.clear();
    p.sh_rest[7] = f32::NAN;
    assert!(
        write_ply(&out, &p)
            .unwrap_err()
            .to_string()
            .contains("not finite")
    );
    assert!(!out.exists());
}

#[test]
fn ascii_with_other_types_and_extras() {
    let text = "ply\nformat ascii 1.0\ncomment made by hand\nelement vertex 2\n\
property double x\nproperty float y\nproperty float z\nproperty uchar red\n\
property float f_dc_0\nproperty float f_dc_1\nproperty float f_dc_2\nproperty int opacity\n\
property float scale_0\nproperty float scale_1\nproperty float scale_2\n\
property float rot_0\nproperty float rot_1\nproperty float rot_2\nproperty float rot_3\n\
element face 0\nproperty list uchar int vertex_indices\nend_header\n\
1.5 2 3 255 0.1 0.2 0.3 -2 -1 -1 -1 2 0 0 0\n\
-1 -2 -3 7 0 0 0 1 0 0 0 0 0 0 0\n";
    let p = parse_ply(text.as_bytes(), Path::new("a.ply")).unwrap();
    assert_eq!(p.gaussians.means, vec![[1.5, 2.0, 3.0], [-1.0, -2.0, -3.0]]);
    assert_eq!(p.gaussians.rotations, vec![[1.0, 0.0, 0.0, 0.0]; 2]);
    assert_eq!(p.gaussians.opacity_logits, vec![-2.0, 1.0]);
    assert_eq!(p.extra_names, ["red"]);
    assert_eq!(p.extra, vec![255.0, 7.0]);
    assert_eq!(p.sh_degree, 0);
    let nan = text.replace("-1 -2 -3 7", "-1 nan -3 7");
    let e = parse_ply(nan.as_bytes(), Path::new("a.ply"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a.ply") && e.contains("vertex 1") && e.contains("`y`"),
        "{e}"
    );
    assert!(err(text.replace("2 0 0 0\n-1", "2 0 0 0\n").as_bytes()).contains("truncated"));
}

#[test]
fn bad_binary_files() {
    let Some(data) = crate::testdata::test_data() else {
        return;
    };
    let bytes = std::fs::read(sh3(&data)).unwrap();
    let e = err(&bytes[..bytes.len() - 100]);
    assert!(e.contains("bad.ply") && e.contains("truncated"), "{e}");
    let s = String::from_utf8_lossy(&bytes[..3000]).into_owned();
    let hdr_end = s.find("end_header\n").unwrap() + 11;
    let swap = |from: &str, to: &str| {
        let mut b = bytes.clone();
        let at = s.find(from).unwrap();
        b[at..at + from.len()].copy_from_slice(to.as_bytes());
        b
    };
    let e = err(&swap("property float opacity", "property float opacitx"));
    assert!(e.contains("missing vertex property `opacity`"), "{e}");
    assert!(err(&swap("f_rest_44", "f_rest_99")).contains("f_rest_44"));
    assert!(err(&swap("f_rest_44", "f_rest_12")).contains("twice"));
    assert!(
        err(&swap(
            "property float f_rest_44",
            "comment xxxxxx f_rest_44"
        ))
        .contains("44 f_rest")
    );
    assert!(
        err(&swap(
            "format binary_little_endian",
            "format binary_middle_endian"
        ))
        .contains("bad header")
    );
    assert!(err(&swap("element vertex 9080", "element vertex 9O80")).contains("count"));
    assert!(err(&swap("element vertex 9080", "element vertex 9081")).contains("truncated"));
    assert!(err(&swap("element vertex", "element vortex")).contains("no `vertex`"));
    let mut b = bytes.clone();
    b[hdr_end + 62 * 4 + 4..hdr_end + 62 * 4 + 8].copy_from_slice(&f32::NAN.to_le_bytes());
    let e = err(&b);
    assert!(
        e.contains("vertex 1") && e.contains("`y`") && e.contains("not finite"),
        "{e}"
    );
    assert!(err(b"ply\nformat binary_little_endian 1.0\n").contains("end_header"));
    assert!(err(b"").contains("not a PLY"));
}

#[test]
fn a_ply_without_vertices_is_named() {
    let mut header = String::from("ply\nformat binary_little_endian 1.0\nelement vertex 0\n");
    for p in [
        "x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
        "rot_0", "rot_1", "rot_2", "rot_3",
    ] {
        header.push_str(&format!("property float {p}\n"));
    }
    header.push_str("end_header\n");
    let e = err(header.as_bytes());
    assert!(e.contains("bad.ply") && e.contains("no Gaussians"), "{e}");
}
