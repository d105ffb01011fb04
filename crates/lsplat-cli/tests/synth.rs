//! `synth` on the real splats: the orbit frames the subject (issue 29, point 18) and
//! the object count is bounded by the Gaussians and costs bounded time (point 6).

mod common;

use common::cli::*;
use lsplat_core::Camera;

/// Share of `pts` projecting inside `cam`'s image, and the share of the image width
/// and height their projections span.
fn framing(cam: &Camera, pts: &[[f32; 3]]) -> (f64, f32, f32) {
    let (mut inside, mut lo, mut hi) = (0usize, [f32::MAX; 2], [f32::MIN; 2]);
    for p in pts {
        let c = cam.rotation * glam::Vec3::from(*p) + cam.translation;
        if c.z <= 0.0 {
            continue;
        }
        let uv = [cam.fx * c.x / c.z + cam.cx, cam.fy * c.y / c.z + cam.cy];
        if (0.0..=cam.width as f32).contains(&uv[0]) && (0.0..=cam.height as f32).contains(&uv[1]) {
            inside += 1;
            for k in 0..2 {
                lo[k] = lo[k].min(uv[k]);
                hi[k] = hi[k].max(uv[k]);
            }
        }
    }
    (
        inside as f64 / pts.len() as f64,
        (hi[0] - lo[0]) / cam.width as f32,
        (hi[1] - lo[1]) / cam.height as f32,
    )
}

/// Every orbit view of the biker and of the guitar holds ≥ 99 % of the opaque
/// Gaussians' centres (opacity ≥ 0.5), and the subject spans at least half the
/// image in one direction (framed, not just far away).
#[test]
fn synth_orbit_frames_the_biker_and_the_guitar() {
    let Some(data) = lsplat_data::testdata::test_data() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, up) in [("biker", "-y"), ("guitar", "-y")] {
        let ply = data.join(format!("splats/playcanvas_{name}.inria_sh0.ply"));
        let out = dir.path().join(name);
        ok(&[
            "synth",
            "--splats",
            s(&ply),
            "--orbit",
            "8",
            "--width",
            "64",
            "--height",
            "48",
            "--up",
            up,
            "--objects",
            "2",
            "--out",
            s(&out),
        ]);
        let g = lsplat_data::ply::read_ply(&ply).unwrap().gaussians;
        let opaque: Vec<[f32; 3]> = (0..g.len())
            .filter(|&i| g.opacity(i) >= 0.5)
            .map(|i| g.means[i])
            .collect();
        assert!(opaque.len() > 1000, "{name}: {} opaque", opaque.len());
        let cams = lsplat_data::cameras::read_inria_cameras(&out.join("cameras.json")).unwrap();
        assert_eq!(cams.len(), 8);
        for cam in &cams {
            let (share, wide, high) = framing(cam, &opaque);
            eprintln!(
                "{name} {}: {:.2}% inside, spans {:.0}% x {:.0}%",
                cam.name,
                100.0 * share,
                100.0 * wide,
                100.0 * high
            );
            assert!(share >= 0.99, "{name} {}: {share}", cam.name);
            assert!(
                wide.max(high) >= 0.5,
                "{name} {}: {wide} x {high}",
                cam.name
            );
        }
    }
}

/// More objects than Gaussians is an error naming both counts, before anything is
/// written; as many objects as Gaussians (90 854 on the guitar) finishes.
#[test]
fn synth_object_count_is_bounded_and_large_counts_finish() {
    let Some(ply) = lsplat_data::testdata::test_file("splats/playcanvas_guitar.inria_sh0.ply")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("too_many");
    let e = fails(&[
        "synth",
        "--splats",
        s(&ply),
        "--objects",
        "100000",
        "--out",
        s(&out),
    ]);
    assert!(
        e.contains("--objects 100000") && e.contains("90854 Gaussians"),
        "{e}"
    );
    assert!(!out.exists(), "nothing is written for a refused count");
    let out = dir.path().join("all");
    let said = ok(&[
        "synth",
        "--splats",
        s(&ply),
        "--objects",
        "90854",
        "--orbit",
        "1",
        "--width",
        "32",
        "--height",
        "24",
        "--out",
        s(&out),
    ]);
    assert!(said.contains("90854 objects"), "{said}");
    let f = lsplat_data::npy::read_npy(&out.join("language_features/frame_00001_f.npy")).unwrap();
    assert_eq!(f.shape, vec![8 * 90854, 3]);
}
