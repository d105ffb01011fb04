//! Tests of the LangSplat reader on small synthetic folders.

use super::*;
use crate::io::write_npy_f32;

/// Writes `<stem>_f.npy` ([rows, dim], row r = r + k/10) and `<stem>_s.npy`.
fn write_pair(
    dir: &Path,
    stem: &str,
    rows: usize,
    dim: usize,
    (w, h): (usize, usize),
    seg: &[f32],
) {
    let f: Vec<f32> = (0..rows * dim)
        .map(|i| (i / dim) as f32 + (i % dim) as f32 / 10.0)
        .collect();
    let (fp, sp) = image_paths(dir, stem);
    write_npy_f32(&fp, &[rows, dim], &f).unwrap();
    write_npy_f32(&sp, &[4, h, w], seg).unwrap();
}

/// A 3x2 image with 5 rows: level 0 uses row 0, level 1 rows 1 and 2, level 2 row 3,
/// level 3 none.
fn seg_a() -> Vec<f32> {
    let mut s = vec![0.0, 0.0, -1.0, 0.0, -1.0, 0.0];
    s.extend([2.0, -1.0, 1.0, 1.0, -1.0, 2.0]);
    s.extend([3.0; 6]);
    s.extend([-1.0; 6]);
    s
}

#[test]
fn labels_use_a_local_table() {
    let dir = tempfile::tempdir().unwrap();
    write_pair(dir.path(), "a", 5, 2, (3, 2), &seg_a());
    let img = read_image(dir.path(), "a").unwrap();
    assert_eq!((img.rows(), img.width, img.height), (5, 3, 2));
    let l = img.labels(1).unwrap();
    assert_eq!(l.valid, vec![0, 2, 3, 5]);
    assert_eq!(l.mask, vec![1, 0, 0, 1]);
    assert_eq!(l.features, vec![1.0, 1.1, 2.0, 2.1]);
    assert_eq!(l.dim, 2);
    let l3 = img.labels(3).unwrap();
    assert!(l3.valid.is_empty() && l3.features.is_empty());
    assert!(img.labels(4).unwrap_err().to_string().contains("level 4"));
}

#[test]
fn load_checks_names_levels_and_dims() {
    let dir = tempfile::tempdir().unwrap();
    write_pair(dir.path(), "a", 5, 2, (3, 2), &seg_a());
    let mut b = seg_a();
    b[6..12].fill(-1.0);
    write_pair(dir.path(), "b", 5, 2, (3, 2), &b);
    let names = vec!["b".to_string(), "a".to_string()];
    let ls = load_langsplat_labels(dir.path(), 1, &names).unwrap();
    assert_eq!(
        (ls[0].name.as_str(), ls[0].valid.len(), ls[1].valid.len()),
        ("b", 0, 4)
    );
    let e = load_langsplat_labels(dir.path(), 3, &names)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("level 3 has no masks in any of the 2 images"),
        "{e}"
    );
    let e = load_langsplat_labels(dir.path(), 1, &["a".to_string(), "c".to_string()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cameras without labels: [c]") && e.contains("without a camera: [b]"),
        "{e}"
    );
    write_pair(dir.path(), "b", 5, 3, (3, 2), &seg_a());
    let e = load_langsplat_labels(dir.path(), 1, &names)
        .unwrap_err()
        .to_string();
    assert!(e.contains("dimension 2") && e.contains("has 3"), "{e}");
    std::fs::remove_file(dir.path().join("b_s.npy")).unwrap();
    assert!(
        list_stems(dir.path())
            .unwrap_err()
            .to_string()
            .contains("`b_f.npy` has no `b_s.npy`")
    );
}

#[test]
fn bad_segmentation_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let err = |seg: &[f32], shape: &[usize]| {
        write_pair(d, "x", 5, 2, (3, 2), &seg_a());
        write_npy_f32(&d.join("x_s.npy"), shape, seg).unwrap();
        read_image(d, "x").unwrap_err().to_string()
    };
    let e = err(&seg_a()[..18], &[3, 2, 3]);
    assert!(e.contains("x_s.npy") && e.contains("[3, 2, 3]"), "{e}");
    let mut s = seg_a();
    s[7] = 5.0;
    let e = err(&s, &[4, 2, 3]);
    assert!(
        e.contains("level 1, pixel (x 1, y 0)") && e.contains("row 5 is out of range"),
        "{e}"
    );
    s[7] = 2.5;
    assert!(err(&s, &[4, 2, 3]).contains("2.5 is neither"));
    s[7] = f32::NAN;
    assert!(err(&s, &[4, 2, 3]).contains("NaN"));
    s[7] = -2.0;
    assert!(err(&s, &[4, 2, 3]).contains("-2 is neither"));
    write_npy_f32(&d.join("x_f.npy"), &[10], &[0.0; 10]).unwrap();
    assert!(
        read_image(d, "x")
            .unwrap_err()
            .to_string()
            .contains("expected [N, D]")
    );
    write_npy_f32(&d.join("x_f.npy"), &[1, 2], &[0.0, f32::INFINITY]).unwrap();
    assert!(
        read_image(d, "x")
            .unwrap_err()
            .to_string()
            .contains("non-finite")
    );
}
